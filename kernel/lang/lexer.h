/* The lexer of the cell language: Python's expression tokens and nothing more. Whatever
 * Python has and taas does not (keywords, ':', '{', comparisons, f-strings, ...) is a
 * TaasSyntaxError here, with a message that says so. */
#ifndef TAAS_LEXER_H
#define TAAS_LEXER_H

#include <stddef.h>
#include <stdint.h>

#include "error.h"

typedef enum taas_tok {
    TAAS_T_EOF,
    TAAS_T_NEWLINE,  /* end of a logical line that held tokens */
    TAAS_T_NAME,     /* one identifier; dotted names are NAME DOT NAME ... */
    TAAS_T_INT,
    TAAS_T_FLOAT,
    TAAS_T_STRING,
    TAAS_T_TRUE,
    TAAS_T_FALSE,
    TAAS_T_NONE,
    TAAS_T_PLUS,     /* + */
    TAAS_T_MINUS,    /* - */
    TAAS_T_STAR,     /* * */
    TAAS_T_SLASH,    /* / */
    TAAS_T_DSLASH,   /* // */
    TAAS_T_PERCENT,  /* % */
    TAAS_T_DSTAR,    /* ** */
    TAAS_T_ASSIGN,   /* = */
    TAAS_T_COMMA,
    TAAS_T_DOT,
    TAAS_T_LPAR,
    TAAS_T_RPAR,
    TAAS_T_LSQB,
    TAAS_T_RSQB,
} taas_tok;

typedef struct taas_token {
    taas_tok kind;
    taas_srcpos pos;  /* first code point */
    taas_srcpos end;  /* just past the last code point (a later line for a triple-quoted string) */
    size_t off, len;  /* bytes of the source the token covers */
    int64_t i;        /* INT */
    double f;         /* FLOAT */
    char *s;          /* NAME: the identifier; STRING: the decoded value, valid UTF-8 */
    size_t slen;
} taas_token;

typedef struct taas_tokens {
    taas_token *v;
    size_t n, cap;
    /* Set when lexing failed only because the cell ended too early: inside a bracket,
     * inside a triple-quoted string or after a trailing backslash (is_complete's
     * "incomplete"). */
    int incomplete;
} taas_tokens;

#define TAAS_TOKENS_INIT {NULL, 0, 0, 0}

/* Splits src into tokens ending with NEWLINE (per logical line) and EOF. On error returns
 * -1 with a TaasSyntaxError; out then holds the tokens before the error (no EOF), which
 * completion and inspection use. Free out with taas_tokens_free in both cases. */
int taas_lex(const char *src, taas_tokens *out, taas_error *err);
void taas_tokens_free(taas_tokens *t);

/* How a token kind reads in a message: "')'", "a name", "the end of the line". */
const char *taas_tok_describe(taas_tok k);

#endif

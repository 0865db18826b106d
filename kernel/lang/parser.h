/* The parser of the cell language: tokens to statements. The grammar (EBNF, also in
 * docs/cell-language.md):
 *
 *   cell      = { [ stmt ] NEWLINE } EOF
 *   stmt      = NAME "=" exprlist | place "=" exprlist | exprlist
 *   place     = NAME { "." NAME } { "." NAME | "[" expr "]" }   (at least one . or [ ])
 *   exprlist  = expr { "," expr } [ "," ]            (a comma makes a tuple)
 *   expr      = term { ( "+" | "-" ) term }
 *   term      = factor { ( "*" | "/" | "//" | "%" ) factor }
 *   factor    = ( "+" | "-" ) factor | power
 *   power     = primary [ "**" factor ]
 *   primary   = atom { "(" [ args ] ")" | "." NAME | "[" expr "]" }
 *   atom      = NAME { "." NAME } | INT | FLOAT | STRING { STRING } | "True" | "False"
 *             | "None" | "(" [ exprlist ] ")" | "[" [ expr { "," expr } [ "," ] ] "]"
 *   args      = arg { "," arg } [ "," ]
 *   arg       = NAME "=" expr | expr
 */
#ifndef TAAS_PARSER_H
#define TAAS_PARSER_H

#include "ast.h"
#include "error.h"
#include "lexer.h"

/* Deepest expression tree the parser builds; it bounds the evaluator's recursion. */
#define TAAS_MAX_EXPR_DEPTH 500

/* Parses the tokens of src (from taas_lex). Returns 0 and fills *out, or -1 with a
 * TaasSyntaxError at the offending token (out is then empty). */
int taas_parse_tokens(const char *src, const taas_tokens *toks, taas_program *out, taas_error *err);

/* Lexes and parses a whole cell. */
int taas_parse(const char *src, taas_program *out, taas_error *err);

#endif

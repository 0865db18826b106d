#include "shell.h"

#include <string.h>

int taas_shell_plain_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           (c != '\0' && strchr("_@%+=:,./-", c));
}

const char *taas_shell_unplain(const char *s) {
    if (!s[0] || s[0] == '-') return s;
    for (; *s; s++)
        if (!taas_shell_plain_char(*s)) return s;
    return NULL;
}

void taas_shell_quote(taas_buf *b, const char *s) {
    const char *c = s;
    while (*c && taas_shell_plain_char(*c)) c++;
    if (s[0] && !*c) {
        taas_buf_puts(b, s);
        return;
    }
    taas_buf_putc(b, '\'');
    for (c = s; *c; c++) {
        if (*c == '\'') taas_buf_puts(b, "'\\''");
        else taas_buf_putc(b, *c);
    }
    taas_buf_putc(b, '\'');
}

void taas_shell_command(taas_buf *b, const char *const *argv, size_t n) {
    for (size_t i = 0; i < n; i++) {
        if (i) taas_buf_putc(b, ' ');
        taas_shell_quote(b, argv[i]);
    }
}

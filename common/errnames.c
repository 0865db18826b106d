#include "errnames.h"

#include <string.h>

#define TAAS_ERRNAME_DEFINE(id, name, meaning) const char id[] = name;
TAAS_ERROR_NAMES(TAAS_ERRNAME_DEFINE)

int taas_error_name_known(const char *name) {
#define TAAS_ERRNAME_IS(id, n, meaning) if (!strcmp(name, n)) return 1;
    TAAS_ERROR_NAMES(TAAS_ERRNAME_IS)
#undef TAAS_ERRNAME_IS
    return 0;
}

void taas_error_names_markdown(FILE *out) {
    fputs("# Errors\n\n"
          "Every error a cell can end with has one of these names (the `ename` of Jupyter's error\n"
          "output); its message says what is wrong and where, its hint what to do. This page is\n"
          "generated from common/errnames.h by `taas-kernel --errors`.\n\n"
          "| name | what it means |\n|---|---|\n",
          out);
#define TAAS_ERRNAME_ROW(id, name, meaning) fprintf(out, "| `%s` | %s |\n", name, meaning);
    TAAS_ERROR_NAMES(TAAS_ERRNAME_ROW)
#undef TAAS_ERRNAME_ROW
}

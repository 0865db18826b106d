#include "self_exe.h"
#include "errnames.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

int taas_self_exe(char *out, size_t n, taas_error *err) {
    ssize_t r = readlink("/proc/self/exe", out, n - 1);
    if (r < 0 || (size_t)r >= n - 1) {
        taas_error_set(err, TAAS_ERR_IO, TAAS_NOPOS, "cannot find the path of taas-kernel itself: %s",
                       r < 0 ? strerror(errno) : "path too long");
        taas_error_hint(err, "/proc must be mounted");
        return -1;
    }
    out[r] = '\0';
    return 0;
}

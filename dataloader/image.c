#include <stdlib.h>
#include <string.h>

#include "dataset.h"

void taas_image_free(taas_image *img) {
    if (!img) return;
    free(img->data);
    memset(img, 0, sizeof *img);
}

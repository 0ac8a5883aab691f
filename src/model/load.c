/* ak_model_load: picks the loader by what the path is (a folder: Hugging Face / MLX
 * safetensors; a file: GGUF). */
#include "model/model_int.h"
#include <sys/stat.h>

ak_status ak_model_load(const char *path, ak_model **out, ak_err *err) {
    *out = NULL;
    struct stat sb;
    if (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode)) return ak_model_load_hf(path, out, err);
    ak_gguf *g;
    ak_status st = ak_gguf_open(path, &g, err);
    return st ? st : ak_model_from_gguf(g, out, err);
}

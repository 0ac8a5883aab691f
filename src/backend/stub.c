/* Stands in for the CUDA backend in builds without nvcc. */
#include "backend/backend.h"
#include "core/err.h"

#ifndef AKUNU_CUDA
ak_status ak_backend_cuda_create(ak_backend **out, ak_err *err) {
    *out = NULL;
    return ak_fail(err, AK_ERR_UNSUPPORTED, "this build of akunu has no CUDA backend (nvcc was not found at build time)");
}

bool ak_backend_cuda_present(void) { return false; }

void ak_cuda_set_debug(const ak_debug *d) { (void)d; }
#endif

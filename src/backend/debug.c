/* ak_debug to the backends: the CPU's kernel limits, the CUDA backend's flags. */
#include "backend/backend.h"
#include "backend/cpu/cpu.h"

void ak_backend_set_debug(const ak_debug *d) {
    ak_debug off = {0};
    if (!d) d = &off;
    ak_cpu_set_limits(d->cpu_scalar, d->cpu_no_vnni, d->cpu_act_f32);
    ak_cuda_set_debug(d);
}

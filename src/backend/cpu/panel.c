/* Panel dispatch by dtype: the float types to panel_f.c, the block types to panel_q.c. */
#include "backend/cpu/panel.h"

static bool is_float(ak_dtype t) { return t == AK_F32 || t == AK_F16 || t == AK_BF16; }

bool ak_panel_supported(ak_dtype t, int64_t K) {
    if ((int)t < 0 || t >= AK_DTYPE_COUNT || K <= 0) return false;
    return is_float(t) ? ak_panel_f_supported(t, K) : ak_panel_q_supported(t, K);
}

size_t ak_panel_bytes(ak_dtype t, int64_t N, int64_t K) {
    return is_float(t) ? ak_panel_f_bytes(t, N, K) : ak_panel_q_bytes(t, N, K);
}

void ak_panel_pack(ak_dtype t, const void *src, int64_t N, int64_t K, void *dst, int64_t p0, int64_t p1) {
    if (is_float(t)) ak_panel_f_pack(t, src, N, K, dst, p0, p1);
    else ak_panel_q_pack(t, src, N, K, dst, p0, p1);
}

size_t ak_panel_scratch(ak_dtype t, int64_t K, int n, bool gemv) {
    return is_float(t) ? ak_panel_f_scratch(t, K, n, gemv) : ak_panel_q_scratch(t, K, n);
}

void ak_panel_mm(ak_dtype t, const void *w, int64_t N, int64_t K, int64_t p0, int64_t p1,
                 const float *x, int64_t ldx, int n, float *y, int64_t ldy, const float *bias,
                 void *scratch, bool gemv) {
    if (is_float(t)) ak_panel_f_mm(t, w, N, K, p0, p1, x, ldx, n, y, ldy, bias, scratch, gemv);
    else ak_panel_q_mm(t, w, N, K, p0, p1, x, ldx, n, y, ldy, bias, scratch, gemv);
}

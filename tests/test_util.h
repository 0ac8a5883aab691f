/* Minimal test harness: CHECK records a failure and goes on; tests end with ak_test_done(). */
#ifndef AK_TEST_UTIL_H
#define AK_TEST_UTIL_H
#include <stdint.h>
#include <stdio.h>
#include <stddef.h>

extern int ak_test_failures, ak_test_checks;

#define CHECK(cond, ...) do { ak_test_checks++; if (!(cond)) { ak_test_failures++; \
    fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond); fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); } } while (0)

int ak_test_done(void);
/* Path under the fixture folder (AKUNU_FIXTURES); static buffer. */
const char *ak_fixture(const char *rel);
/* Whole file into memory; NULL on failure. */
void *ak_read_file(const char *path, size_t *size);
/* Deterministic random numbers for tests. */
uint32_t ak_rand_u32(uint64_t *state);
float ak_rand_f(uint64_t *state); /* uniform in [-1, 1) */
double ak_rel_l2(const float *out, const float *ref, size_t n);
/* The activation act (ak_act) of x in double; tanh-GELU as x / (1 + e^-2y), the same as
 * 0.5 x (1 + tanh y) but without its cancellation for negative x. */
double ak_act_ref(int act, double x);
/* ak_set_debug for a test: the CPU limits the ctest entry sets (AKUNU_SCALAR=1,
 * AKUNU_NO_VNNI=1; the library itself reads no environment) and float activations. */
void ak_test_debug(int act_f32);



/* The int array under "key" in a JSON text, searched after "scope" if scope is not NULL
 * (enough for the fixtures' manifest.json). Returns the count, -1 if not found. */
int ak_json_ints(const char *json, const char *scope, const char *key, int32_t *out, int cap);
#endif

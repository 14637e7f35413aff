/* The two LZ4 functions Verilator's FST writer calls, declared as in lz4's public API
 * (lz4.h, LZ4_VERSION_MAJOR 1).  Used only when the system has the LZ4 run-time library
 * (liblz4.so.1, on every Debian) but not its development header; see hw/harness/simulation.py. */
#ifndef NPU_LZ4_SHIM_H
#define NPU_LZ4_SHIM_H
#ifdef __cplusplus
extern "C" {
#endif
int LZ4_compressBound(int inputSize);
int LZ4_compress_default(const char* src, char* dst, int srcSize, int dstCapacity);
#ifdef __cplusplus
}
#endif
#endif

/* hs_io.h - element conversion between graph I/O data types and float32. */
#ifndef HOSTSIM_IO_H
#define HOSTSIM_IO_H

#include <stddef.h>
#include <stdint.h>

#include "hs_format.h"

/* hs_load converts n elements starting at element `start` of tensor t's buffer p into dst. */
void hs_load(const hs_tensor *t, const void *p, size_t start, size_t n, float *dst);
/* hs_load_raw reads n raw 16-bit (or 8-bit) integers. */
void hs_load_raw(const hs_tensor *t, const void *p, size_t start, size_t n, uint32_t *dst);
/* hs_store converts n floats into tensor t's buffer p at element `start`. */
void hs_store(const hs_tensor *t, void *p, size_t start, size_t n, const float *src);

/* hs_poison fills n elements from `start` with the padding pattern: every byte 0xFF for float types
 * (a NaN: FLOAT_32 0xFFFFFFFF, FLOAT_16 0xFFFF), every byte 0xA5 for fixed-point and integer types
 * (0xA5, 0xA5A5). */
void hs_poison(const hs_tensor *t, void *p, size_t start, size_t n);

#endif

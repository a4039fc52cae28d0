/* hs_io.c - element conversion between graph I/O data types and float32. */
#include "hs_io.h"

#include <math.h>
#include <string.h>

#include "hs_model.h"
#include "qnn_abi.h"

void hs_load(const hs_tensor *t, const void *p, size_t start, size_t n, float *dst) {
  const uint8_t *b = p;
  switch (t->dtype) {
  case QNN_DATATYPE_FLOAT_32: memcpy(dst, b + 4 * start, 4 * n); return;
  case QNN_DATATYPE_FLOAT_16:
    for (size_t i = 0; i < n; i++) {
      uint16_t h;
      memcpy(&h, b + 2 * (start + i), 2);
      dst[i] = hs_f16_to_f32(h);
    }
    return;
  case QNN_DATATYPE_UFIXED_POINT_16:
  case QNN_DATATYPE_UINT_16:
    for (size_t i = 0; i < n; i++) {
      uint16_t q;
      memcpy(&q, b + 2 * (start + i), 2);
      dst[i] = t->dtype == QNN_DATATYPE_UINT_16 ? (float)q : ((float)q + (float)t->offset) * t->scale;
    }
    return;
  case QNN_DATATYPE_SFIXED_POINT_16:
    for (size_t i = 0; i < n; i++) {
      int16_t q;
      memcpy(&q, b + 2 * (start + i), 2);
      dst[i] = ((float)q + (float)t->offset) * t->scale;
    }
    return;
  case QNN_DATATYPE_UFIXED_POINT_8:
    for (size_t i = 0; i < n; i++) dst[i] = ((float)b[start + i] + (float)t->offset) * t->scale;
    return;
  default: memset(dst, 0, 4 * n);
  }
}

void hs_load_raw(const hs_tensor *t, const void *p, size_t start, size_t n, uint32_t *dst) {
  const uint8_t *b = p;
  for (size_t i = 0; i < n; i++) {
    if (hs_dtype_bytes(t->dtype) == 1) dst[i] = b[start + i];
    else {
      uint16_t q;
      memcpy(&q, b + 2 * (start + i), 2);
      dst[i] = q;
    }
  }
}

static double clampd(double v, double lo, double hi) { return v < lo ? lo : v > hi ? hi : v; }

void hs_store(const hs_tensor *t, void *p, size_t start, size_t n, const float *src) {
  uint8_t *b = p;
  switch (t->dtype) {
  case QNN_DATATYPE_FLOAT_32: memcpy(b + 4 * start, src, 4 * n); return;
  case QNN_DATATYPE_FLOAT_16:
    for (size_t i = 0; i < n; i++) {
      uint16_t h = hs_f32_to_f16(src[i]);
      memcpy(b + 2 * (start + i), &h, 2);
    }
    return;
  case QNN_DATATYPE_UFIXED_POINT_16:
  case QNN_DATATYPE_UINT_16:
    for (size_t i = 0; i < n; i++) {
      double q = t->dtype == QNN_DATATYPE_UINT_16 ? src[i] : nearbyint((double)src[i] / t->scale) - t->offset;
      uint16_t v = (uint16_t)clampd(q, 0, 65535);
      memcpy(b + 2 * (start + i), &v, 2);
    }
    return;
  case QNN_DATATYPE_SFIXED_POINT_16:
    for (size_t i = 0; i < n; i++) {
      int16_t v = (int16_t)clampd(nearbyint((double)src[i] / t->scale) - t->offset, -32768, 32767);
      memcpy(b + 2 * (start + i), &v, 2);
    }
    return;
  case QNN_DATATYPE_UFIXED_POINT_8:
    for (size_t i = 0; i < n; i++) b[start + i] = (uint8_t)clampd(nearbyint((double)src[i] / t->scale) - t->offset, 0, 255);
    return;
  default: return;
  }
}

void hs_poison(const hs_tensor *t, void *p, size_t start, size_t n) {
  uint32_t es = hs_dtype_bytes(t->dtype);
  int fl = t->dtype == QNN_DATATYPE_FLOAT_32 || t->dtype == QNN_DATATYPE_FLOAT_16;
  if (es) memset((uint8_t *)p + es * start, fl ? 0xFF : 0xA5, es * n);
}

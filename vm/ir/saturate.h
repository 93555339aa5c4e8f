/* saturate.h - double to each integer dtype, defined for every input: truncate toward zero, saturate at the range, NaN gives 0 (tensor element access and the cast and fill kernels). */
#ifndef FVM_SATURATE_H
#define FVM_SATURATE_H

#include <stdint.h>

static inline int64_t fvm_sat_i64(double v)
{
    if (v != v)
        return 0;
    if (v >= 0x1p63)
        return INT64_MAX;
    if (v < -0x1p63)
        return INT64_MIN;
    return (int64_t)v;
}

static inline int32_t fvm_sat_i32(double v)
{
    if (v != v)
        return 0;
    if (v >= 0x1p31)
        return INT32_MAX;
    if (v <= -0x1p31 - 1.0)
        return INT32_MIN;
    return (int32_t)v;
}

static inline uint32_t fvm_sat_u32(double v)
{
    if (!(v >= 1.0))
        return 0; /* NaN, negatives and [0, 1) */
    if (v >= 0x1p32)
        return UINT32_MAX;
    return (uint32_t)v;
}

static inline uint8_t fvm_sat_u8(double v)
{
    if (!(v >= 1.0))
        return 0; /* NaN, negatives and [0, 1) */
    if (v >= 255.0)
        return UINT8_MAX;
    return (uint8_t)v;
}

#endif

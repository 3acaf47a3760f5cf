/* TFRecord framing and the few protobuf messages of a scalar event. */
#include "tb_event.h"

#include <string.h>

/* ---------------------------------------------------------------- CRC */

uint32_t tb_crc32c(const void *p, size_t n)
{
    const uint8_t *b = p;
    uint32_t crc = 0xffffffffu;
    for (size_t i = 0; i < n; i++) {
        crc ^= b[i];
        for (int k = 0; k < 8; k++) crc = (crc >> 1) ^ (0x82f63b78u & (0u - (crc & 1u)));
    }
    return ~crc;
}

uint32_t tb_mask_crc(uint32_t crc)
{
    return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

/* ----------------------------------------------------------- protobuf */

/* A message under construction, in a fixed buffer (scalar events are
 * small: a tag of at most TB_MAX_TAG bytes plus a few fixed fields). */
#define TB_MAX_TAG 1000
typedef struct PbBuf {
    uint8_t b[TB_MAX_TAG + 64];
    size_t n;
} PbBuf;

static void pb_varint(PbBuf *m, uint64_t v)
{
    do {
        uint8_t byte = v & 0x7f;
        v >>= 7;
        m->b[m->n++] = byte | (v ? 0x80 : 0);
    } while (v);
}

static void pb_key(PbBuf *m, int field, int wire_type)
{
    pb_varint(m, (uint64_t)field << 3 | (uint64_t)wire_type);
}

static void pb_fixed(PbBuf *m, int field, const void *le, int bytes)
{
    pb_key(m, field, bytes == 8 ? 1 : 5);
    memcpy(m->b + m->n, le, (size_t)bytes); /* x86-64 and aarch64: little-endian */
    m->n += (size_t)bytes;
}

static void pb_bytes(PbBuf *m, int field, const void *p, size_t n)
{
    pb_key(m, field, 2);
    pb_varint(m, n);
    memcpy(m->b + m->n, p, n);
    m->n += n;
}

/* ------------------------------------------------------------ records */

static CtStatus write_record(FILE *f, const PbBuf *m)
{
    uint8_t head[12];
    uint64_t len = m->n;
    memcpy(head, &len, 8);
    uint32_t hcrc = tb_mask_crc(tb_crc32c(head, 8));
    memcpy(head + 8, &hcrc, 4);
    uint32_t dcrc = tb_mask_crc(tb_crc32c(m->b, m->n));
    if (fwrite(head, 1, 12, f) != 12 || fwrite(m->b, 1, m->n, f) != m->n ||
        fwrite(&dcrc, 1, 4, f) != 4 || fflush(f) != 0)
        return ct_error(CT_ERR_IO, "TensorBoard: cannot write the event file");
    return CT_OK;
}

/* Event fields: 1 wall_time (double), 2 step (int64), 3 file_version
 * (string), 5 summary (Summary). */
CtStatus tb_write_file_version(FILE *f, double wall_time)
{
    PbBuf ev = {.n = 0};
    pb_fixed(&ev, 1, &wall_time, 8);
    pb_bytes(&ev, 3, "brain.Event:2", 13);
    return write_record(f, &ev);
}

/* Summary: 1 repeated Value; Value: 1 tag (string), 2 simple_value (float). */
CtStatus tb_write_scalar(FILE *f, double wall_time, int64_t step, const char *tag,
                         float value)
{
    size_t tag_len = strlen(tag);
    if (tag_len > TB_MAX_TAG)
        return ct_error(CT_ERR_INVALID, "TensorBoard: tag '%.40s...' is over %d bytes",
                        tag, TB_MAX_TAG);
    PbBuf val = {.n = 0}, sum = {.n = 0}, ev = {.n = 0};
    pb_bytes(&val, 1, tag, tag_len);
    pb_fixed(&val, 2, &value, 4);
    pb_bytes(&sum, 1, val.b, val.n);
    pb_fixed(&ev, 1, &wall_time, 8);
    pb_key(&ev, 2, 0);
    pb_varint(&ev, (uint64_t)step);
    pb_bytes(&ev, 5, sum.b, sum.n);
    return write_record(f, &ev);
}

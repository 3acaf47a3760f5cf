/* TensorBoard event files, written by hand: TFRecord framing (length and
 * payload, each followed by its masked CRC-32C) around tensorflow.Event
 * protobuf messages. Private to the TensorBoard callback. */
#ifndef CTRAINER_TB_EVENT_H
#define CTRAINER_TB_EVENT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "ctrainer/status.h"

/* CRC-32C (Castagnoli) of p[0..n). */
uint32_t tb_crc32c(const void *p, size_t n);
/* TFRecord's masked form of a CRC: rotated right by 15 plus 0xa282ead8. */
uint32_t tb_mask_crc(uint32_t crc);

/* The first event of a file: Event{wall_time, file_version "brain.Event:2"}. */
CtStatus tb_write_file_version(FILE *f, double wall_time);
/* One scalar: Event{wall_time, step, summary{value{tag, simple_value}}}.
 * Errors: CT_ERR_INVALID for a tag over 1000 bytes, CT_ERR_IO on a failed
 * write. */
CtStatus tb_write_scalar(FILE *f, double wall_time, int64_t step, const char *tag,
                         float value);

#endif

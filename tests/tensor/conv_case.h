/* The convolution the cuDNN suites share (test_dnn_desc.c, test_cuda_dnn.c):
 * x (2, 4, 9, 7), w (6, 2, 3, 3), groups 2, stride (2, 1), padding (1, 0),
 * dilation (1, 2): oh = (9 + 2 - 2 - 1)/2 + 1 = 5, ow = (7 - 4 - 1)/1 + 1 = 3,
 * y (2, 6, 5, 3). Every field differs from its neighbours, so a swapped
 * height/width or a misplaced argument shows. */
#ifndef CTRAINER_TESTS_TENSOR_CONV_CASE_H
#define CTRAINER_TESTS_TENSOR_CONV_CASE_H

#include "tensor/conv.h"

static const CtConv2dParams conv_case = {.n = 2,
                                         .c = 4,
                                         .h = 9,
                                         .w = 7,
                                         .o = 6,
                                         .kh = 3,
                                         .kw = 3,
                                         .oh = 5,
                                         .ow = 3,
                                         .sh = 2,
                                         .sw = 1,
                                         .ph = 1,
                                         .pw = 0,
                                         .dh = 1,
                                         .dw = 2,
                                         .groups = 2,
                                         .autocast = CT_F32};

#endif

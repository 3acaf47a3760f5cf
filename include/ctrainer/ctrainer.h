/* ctrainer — the umbrella header: every public layer. */
#ifndef CTRAINER_H
#define CTRAINER_H

#include "ctrainer/callbacks.h"
#include "ctrainer/data.h"
#include "ctrainer/io.h"
#include "ctrainer/metrics.h"
#include "ctrainer/nn.h"
#include "ctrainer/optim.h"
#include "ctrainer/runtime.h"
#include "ctrainer/status.h"
#include "ctrainer/table.h"
#include "ctrainer/tensor.h"
#include "ctrainer/tensor_optim.h"
#include "ctrainer/trainer.h"

#endif

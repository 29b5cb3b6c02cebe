#include "cohort/core/nn/ops/elementwise.h"

namespace cohort {}  // namespace cohort

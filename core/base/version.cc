#include "cohort/core/base/version.h"

namespace cohort {

const char* version() { return COHORT_VERSION; }

}  // namespace cohort

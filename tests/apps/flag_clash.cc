// A user's program that defines a flag Cohort's library defines too (--ps_tasks): it links, and
// app::Run refuses to start with the message docs/FLAGS.md promises, naming both definitions.
#include "cohort/core/base/flags.h"
#include "cohort/core/dist/cluster.h"
#include "cohort/core/train/app.h"

COHORT_DEFINE_int(ps_tasks, 3, "the program's own meaning of --ps_tasks");

namespace {

int Main(int, char**) { return cohort::cluster_from_flags().size() > 0 ? 0 : 1; }

}  // namespace

int main(int argc, char** argv) { return cohort::app::Run(Main, argc, argv); }

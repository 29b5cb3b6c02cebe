# Sourced by Cohort's scripts: lets mpirun run as root (CI containers) and run more ranks than
# cores without the ranks starving each other by busy-polling.
if [ "$(id -u)" -eq 0 ]; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi
export OMPI_MCA_rmaps_base_oversubscribe=1
export OMPI_MCA_mpi_yield_when_idle=1
# One OpenMP thread per rank unless asked (--threads): ranks already fill the cores.
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}

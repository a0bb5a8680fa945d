// make_mpi_backend for builds without MPI.
#ifndef DTRAIN_HAVE_MPI
#include "comm/backend.h"
#include "core/error.h"

namespace dt::comm {

std::unique_ptr<Backend> make_mpi_backend(const BackendOptions&) {
  fail(DT_ERR_UNSUPPORTED, "backend \"mpi\": libdtrain was built without MPI (DTRAIN_WITH_MPI=OFF)");
}

}  // namespace dt::comm
#endif

// Thread count: one OpenMP team for the whole process.
#pragma once

namespace plainllama {

// Physical cores (hyper-threads counted once), at least 1.
int physical_cores();
// Sets the OpenMP team size used by every kernel.
void set_threads(int n);

}  // namespace plainllama

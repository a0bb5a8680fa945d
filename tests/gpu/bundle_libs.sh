# What the GPU image itself provides, by SONAME: sourced by bundle.sh (which leaves these out
# of the bundle) and check_bundle.sh (which checks each resolves where the image has it).
# The C and C++ runtime every Linux has:
base_re='^(linux-vdso\.so\.1|libc\.so\.6|libm\.so\.6|libdl\.so\.2|libpthread\.so\.0|librt\.so\.1|libgcc_s\.so\.1|libstdc\+\+\.so\.6|ld-linux-x86-64\.so\.2)$'
# The CUDA toolkit's runtime and cuBLAS (nothing else of the toolkit is on the image):
toolkit_re='^(libcudart\.so\.[0-9]+|libcublas\.so\.[0-9]+|libcublasLt\.so\.[0-9]+)$'
# The driver's library and NCCL's pip wheel:
driver_and_nccl_re='^(libcuda\.so\.1|libnccl\.so\.2)$'

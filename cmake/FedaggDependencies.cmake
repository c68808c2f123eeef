# Finds every third-party dependency from the system's packages and checks the
# minimum versions listed in docs/DEPENDENCIES.md. Each failure names the
# Debian package that provides the missing piece; scripts/setup.sh installs them.

function(fedagg_require_version what found minimum package)
  if(found VERSION_LESS minimum)
    message(FATAL_ERROR
      "fedagg needs ${what} >= ${minimum}, found ${found}. "
      "Install a newer '${package}' (scripts/setup.sh installs the tested version).")
  endif()
endfunction()

find_package(absl CONFIG QUIET)
if(NOT absl_FOUND)
  message(FATAL_ERROR "Abseil not found: install the Debian package 'libabsl-dev' "
                      "(or run scripts/setup.sh).")
endif()
# Abseil's package config carries no usable version; check for the 20220623 API we use.
if(NOT TARGET absl::statusor)
  message(FATAL_ERROR "Abseil is too old (no absl::statusor): fedagg needs libabsl-dev >= 20220623.")
endif()

find_package(Threads REQUIRED)

# libcrypto: differential privacy's noise (ChaCha20 keystreams, the system's secure source).
find_package(OpenSSL 3.0 QUIET COMPONENTS Crypto)
if(NOT OpenSSL_FOUND)
  message(FATAL_ERROR "OpenSSL's libcrypto >= 3.0 not found: install 'libssl-dev' (or run scripts/setup.sh).")
endif()

# cpp-httplib: the HTTP listener (metrics, and the HTTP path of clients without streams).
# Debian builds it as a library with TLS; its pkg-config file carries the matching defines.
find_package(PkgConfig QUIET)
if(PkgConfig_FOUND)
  pkg_check_modules(CppHttplib QUIET IMPORTED_TARGET cpp-httplib>=0.11)
endif()
if(NOT CppHttplib_FOUND)
  message(FATAL_ERROR "cpp-httplib >= 0.11 not found: install 'libcpp-httplib-dev' and 'pkg-config' "
                      "(or run scripts/setup.sh).")
endif()

if(FEDAGG_BUILD_TESTS)
  find_package(GTest 1.12 QUIET)
  if(NOT GTest_FOUND)
    message(FATAL_ERROR "GoogleTest >= 1.12 not found: install 'libgtest-dev' and "
                        "'libgmock-dev', or configure with -DFEDAGG_BUILD_TESTS=OFF.")
  endif()
endif()

if(FEDAGG_BUILD_BENCHMARKS)
  find_package(benchmark QUIET)
  if(NOT benchmark_FOUND)
    message(FATAL_ERROR "Google Benchmark not found: install 'libbenchmark-dev', "
                        "or configure with -DFEDAGG_BUILD_BENCHMARKS=OFF.")
  endif()
  fedagg_require_version("Google Benchmark" "${benchmark_VERSION}" 1.7 libbenchmark-dev)
endif()

find_package(Protobuf 3.12 QUIET)
if(NOT Protobuf_FOUND)
  message(FATAL_ERROR "Protobuf >= 3.12 not found: install 'libprotobuf-dev' and 'protobuf-compiler'.")
endif()
find_package(gRPC CONFIG QUIET)
if(NOT gRPC_FOUND)
  message(FATAL_ERROR "gRPC not found: install 'libgrpc++-dev' and 'protobuf-compiler-grpc'.")
endif()
fedagg_require_version("gRPC" "${gRPC_VERSION}" 1.51 libgrpc++-dev)
if(NOT TARGET gRPC::grpc_cpp_plugin)
  message(FATAL_ERROR "grpc_cpp_plugin not found: install 'protobuf-compiler-grpc'.")
endif()

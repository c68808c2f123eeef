# What `cmake --install` puts under the prefix: the fedagg-server and fedagg-client
# programs (and the cuda plugin beside the server), the C++ client library with the libraries and headers it needs, and a CMake
# package so that another project can write
#     find_package(fedagg 0.1 REQUIRED)
#     target_link_libraries(app PRIVATE fedagg::client)
# The package finds Abseil, Protobuf and gRPC the way this build found them.
include(CMakePackageConfigHelpers)

set(FEDAGG_INSTALL_CMAKEDIR "${CMAKE_INSTALL_LIBDIR}/cmake/fedagg")

install(TARGETS fedagg-server fedagg-client RUNTIME DESTINATION "${CMAKE_INSTALL_BINDIR}")
if(FEDAGG_WITH_CUDA)  # the cuda backend's plugin, beside the server that looks for it there
  install(TARGETS fedagg_backend_cuda LIBRARY DESTINATION "${CMAKE_INSTALL_BINDIR}")
endif()

# fedagg::client and what it links: the update validation and spec conversion of
# fedagg::rounds and fedagg::core, secure aggregation's client side in fedagg::secagg, and
# the generated messages and stubs of fedagg::proto.
set_target_properties(fedagg_client PROPERTIES EXPORT_NAME client)
set_target_properties(fedagg_rounds PROPERTIES EXPORT_NAME rounds)
set_target_properties(fedagg_core PROPERTIES EXPORT_NAME core)
set_target_properties(fedagg_proto PROPERTIES EXPORT_NAME proto)
set_target_properties(fedagg_secagg PROPERTIES EXPORT_NAME secagg)
install(TARGETS fedagg_client fedagg_rounds fedagg_secagg fedagg_core fedagg_proto
        EXPORT fedaggTargets
        ARCHIVE DESTINATION "${CMAKE_INSTALL_LIBDIR}"
        LIBRARY DESTINATION "${CMAKE_INSTALL_LIBDIR}")

install(FILES client_stub/client.h client_stub/encoding_conversion.h client_stub/secure_contribution.h
              client_stub/update_encoder.h
        DESTINATION "${FEDAGG_INSTALL_INCLUDEDIR}/client_stub")
foreach(dir service/core service/rounds service/secagg)
  install(DIRECTORY "${dir}/" DESTINATION "${FEDAGG_INSTALL_INCLUDEDIR}/${dir}" FILES_MATCHING PATTERN "*.h")
endforeach()
install(DIRECTORY "${PROJECT_BINARY_DIR}/proto/fedagg/v1/" DESTINATION "${FEDAGG_INSTALL_INCLUDEDIR}/fedagg/v1"
        FILES_MATCHING PATTERN "*.pb.h")

install(EXPORT fedaggTargets NAMESPACE fedagg:: DESTINATION "${FEDAGG_INSTALL_CMAKEDIR}")
configure_package_config_file(cmake/fedaggConfig.cmake.in "${PROJECT_BINARY_DIR}/fedaggConfig.cmake"
                              INSTALL_DESTINATION "${FEDAGG_INSTALL_CMAKEDIR}")
write_basic_package_version_file("${PROJECT_BINARY_DIR}/fedaggConfigVersion.cmake"
                                 COMPATIBILITY SameMinorVersion)
install(FILES "${PROJECT_BINARY_DIR}/fedaggConfig.cmake" "${PROJECT_BINARY_DIR}/fedaggConfigVersion.cmake"
        DESTINATION "${FEDAGG_INSTALL_CMAKEDIR}")

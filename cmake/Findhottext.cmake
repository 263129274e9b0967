# find_package(hottext) in module mode: add this folder to CMAKE_MODULE_PATH. See hottext.cmake.
include("${CMAKE_CURRENT_LIST_DIR}/hottext.cmake")
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(hottext REQUIRED_VARS HOTTEXT_EXECUTABLE)

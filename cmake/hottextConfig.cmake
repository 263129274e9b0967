# find_package(hottext CONFIG): see hottext.cmake. Point CMAKE_PREFIX_PATH or hottext_DIR here.
include("${CMAKE_CURRENT_LIST_DIR}/hottext.cmake")

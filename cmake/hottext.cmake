# hottext for CMake: one call per executable lays out its hot functions from the profile that
# the service's meta file names, and (optionally) links the runtime that maps them onto huge pages.
#
#   list(APPEND CMAKE_MODULE_PATH /path/to/hottext/cmake)   # or CMAKE_PREFIX_PATH, for CONFIG mode
#   find_package(hottext REQUIRED)
#   add_executable(server main.c ...)
#   hottext_optimize(server META hottext/server.meta)
#
# hottext_optimize(<target>
#     META <file>                     meta file written by `hottext pipeline run` (required)
#     [LINKER bfd|gold|lld]           the linker to link with (-fuse-ld; default bfd), which
#                                     picks the input: bfd and lld a linker script (-T), gold a
#                                     section order file and the markers object
#     [RUNTIME none|static|auto]      none (default); static: link libhottext.a, call
#                                     hugify_self() in main(); auto: link the constructor variant,
#                                     no code change
#     [ON_MISSING fail|warn]          no usable profile: fail the build (default, as in the paper)
#                                     or build unoptimised with a loud warning
#     [STORE <url>]                   fetch from this store instead of the meta file's
#     [MIN_MATCHED <fraction>])       refuse a profile less than this much of which matches (0.5)
#
# What it does to <target>: compiles it with -ffunction-sections -fno-omit-frame-pointer (each
# function in its own section, stack samples with callers); before the link, links the same
# objects once without ordering (the "probe", unresolved symbols allowed) and runs
# `hottext fetch --binary probe`, which fetches the profile by hash, checks it and writes the
# ordering input; then links with it. The target relinks when the meta file changes.
# It leaves code alignment alone; docs/build.md recommends -falign-jumps=1 -falign-loops=1
# -falign-labels=1 for hot code (measured there), to add with target_compile_options.
#
# Variables: HOTTEXT_EXECUTABLE (the hottext command), HOTTEXT_RUNTIME_LIBRARY (libhottext.a),
# HOTTEXT_RUNTIME_AUTO_LIBRARY (libhottext_auto.a), HOTTEXT_INCLUDE_DIR (hottext.h). Set them to
# override the search, which looks in this source tree first (target/release, runtime/build).

cmake_minimum_required(VERSION 3.15) # $<TARGET_OBJECTS> of an executable

if(DEFINED _HOTTEXT_CMAKE_INCLUDED)
  return()
endif()
set(_HOTTEXT_CMAKE_INCLUDED TRUE)
set(_HOTTEXT_CMAKE_DIR "${CMAKE_CURRENT_LIST_DIR}")
get_filename_component(_hottext_root "${CMAKE_CURRENT_LIST_DIR}/.." ABSOLUTE)

find_program(HOTTEXT_EXECUTABLE hottext
  HINTS "${_hottext_root}/target/release" "${_hottext_root}/target/debug"
  DOC "the hottext command")
find_library(HOTTEXT_RUNTIME_LIBRARY NAMES libhottext.a hottext
  HINTS "${_hottext_root}/runtime/build/lib" DOC "hottext runtime (static)")
find_library(HOTTEXT_RUNTIME_AUTO_LIBRARY NAMES libhottext_auto.a
  HINTS "${_hottext_root}/runtime/build/lib" DOC "hottext runtime, constructor variant")
find_path(HOTTEXT_INCLUDE_DIR hottext.h
  HINTS "${_hottext_root}/runtime/include" DOC "hottext.h")

if(HOTTEXT_EXECUTABLE)
  set(hottext_FOUND TRUE)
else()
  set(hottext_FOUND FALSE)
  if(hottext_FIND_REQUIRED)
    message(FATAL_ERROR "hottext: no `hottext` command found: build it (cargo build --release) "
                        "or set HOTTEXT_EXECUTABLE")
  endif()
endif()

function(hottext_optimize target)
  cmake_parse_arguments(PARSE_ARGV 1 HT "" "META;LINKER;RUNTIME;ON_MISSING;STORE;MIN_MATCHED" "")
  if(HT_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "hottext_optimize(${target}): unknown arguments ${HT_UNPARSED_ARGUMENTS}")
  endif()
  if(NOT HT_META)
    message(FATAL_ERROR "hottext_optimize(${target}): META <file> is required")
  endif()
  if(NOT HOTTEXT_EXECUTABLE)
    message(FATAL_ERROR "hottext_optimize(${target}): no hottext command (HOTTEXT_EXECUTABLE)")
  endif()
  foreach(pair "LINKER;bfd" "RUNTIME;none" "ON_MISSING;fail" "MIN_MATCHED;0.5")
    list(GET pair 0 key)
    list(GET pair 1 default)
    if(NOT HT_${key})
      set(HT_${key} "${default}")
    endif()
  endforeach()

  get_filename_component(meta "${HT_META}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_SOURCE_DIR}")
  set(dir "${CMAKE_CURRENT_BINARY_DIR}/hottext/${target}")
  file(MAKE_DIRECTORY "${dir}")

  target_compile_options(${target} PRIVATE -ffunction-sections -fno-omit-frame-pointer)

  # -fuse-ld picks the linker the input is for. gcc finds ld.lld on PATH or in a -B directory
  # (Debian's lld-19: target_link_options(<target> PRIVATE -B/usr/lib/llvm-19/bin)).
  if(HT_LINKER STREQUAL "bfd" OR HT_LINKER STREQUAL "lld")
    set(format ld-script)
    set(input "${dir}/hot.ld")
    target_link_options(${target} PRIVATE "-fuse-ld=${HT_LINKER}" "LINKER:-T,${input}")
    set(markers_args "")
  elseif(HT_LINKER STREQUAL "gold")
    set(format gold-order)
    set(input "${dir}/order.txt")
    target_link_options(${target} PRIVATE -fuse-ld=gold
                        "LINKER:--section-ordering-file=${input}" "${dir}/hot_markers.o")
    set(markers_args --markers "${dir}/hot_markers.o")
  else()
    message(FATAL_ERROR "hottext_optimize(${target}): LINKER must be bfd, gold or lld")
  endif()

  set(store_args "")
  if(HT_STORE)
    set(store_args --store "${HT_STORE}")
  endif()

  # The probe: the same objects linked plainly, for fetch to match names and code against.
  # Libraries are not needed for that, so unresolved symbols are allowed.
  get_property(languages GLOBAL PROPERTY ENABLED_LANGUAGES)
  if("CXX" IN_LIST languages)
    set(driver "${CMAKE_CXX_COMPILER}")
  else()
    set(driver "${CMAKE_C_COMPILER}")
  endif()
  add_custom_command(TARGET ${target} PRE_LINK
    COMMAND "${driver}" -o "${dir}/probe" "$<TARGET_OBJECTS:${target}>"
            -Wl,--unresolved-symbols=ignore-all
    COMMAND "${HOTTEXT_EXECUTABLE}" fetch --meta "${meta}" --binary "${dir}/probe"
            --format ${format} -o "${input}" ${markers_args} ${store_args}
            --on-missing ${HT_ON_MISSING} --min-matched ${HT_MIN_MATCHED}
    COMMENT "hottext: ordering ${target} by the profile in ${HT_META}"
    VERBATIM COMMAND_EXPAND_LISTS)

  # Relink when the meta file changes (also when it appears or goes away).
  set(copy "${dir}/meta.copy")
  if(NOT EXISTS "${copy}")
    file(WRITE "${copy}" "")
  endif()
  add_custom_target(${target}_hottext_meta
    COMMAND "${CMAKE_COMMAND}" -DSRC=${meta} -DDST=${copy}
            -P "${_HOTTEXT_CMAKE_DIR}/hottext_sync_meta.cmake"
    BYPRODUCTS "${copy}" VERBATIM)
  add_dependencies(${target} ${target}_hottext_meta)
  set_property(TARGET ${target} APPEND PROPERTY LINK_DEPENDS "${copy}" "${HOTTEXT_EXECUTABLE}")

  if(HT_RUNTIME STREQUAL "static")
    if(NOT HOTTEXT_RUNTIME_LIBRARY OR NOT HOTTEXT_INCLUDE_DIR)
      message(FATAL_ERROR "hottext_optimize(${target}): RUNTIME static needs libhottext.a and "
                          "hottext.h (make -C runtime, or set HOTTEXT_RUNTIME_LIBRARY)")
    endif()
    target_include_directories(${target} PRIVATE "${HOTTEXT_INCLUDE_DIR}")
    target_link_libraries(${target} PRIVATE "${HOTTEXT_RUNTIME_LIBRARY}")
  elseif(HT_RUNTIME STREQUAL "auto")
    if(NOT HOTTEXT_RUNTIME_AUTO_LIBRARY)
      message(FATAL_ERROR "hottext_optimize(${target}): RUNTIME auto needs libhottext_auto.a "
                          "(make -C runtime, or set HOTTEXT_RUNTIME_AUTO_LIBRARY)")
    endif()
    get_filename_component(libdir "${HOTTEXT_RUNTIME_AUTO_LIBRARY}" DIRECTORY)
    # libhottext_auto.a is a linker script naming hottext_auto.o and libhottext.a beside it.
    target_link_options(${target} PRIVATE "-L${libdir}")
    target_link_libraries(${target} PRIVATE hottext_auto)
  elseif(NOT HT_RUNTIME STREQUAL "none")
    message(FATAL_ERROR "hottext_optimize(${target}): RUNTIME must be none, static or auto")
  endif()
endfunction()

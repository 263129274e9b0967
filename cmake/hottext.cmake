# hottext for CMake: one call per executable lays out its hot functions from the profile that
# the service's meta file names, and (optionally) links the runtime that maps them onto huge pages.
#
#   list(APPEND CMAKE_MODULE_PATH /path/to/hottext/cmake)   # or CMAKE_PREFIX_PATH, for CONFIG mode
#   find_package(hottext REQUIRED)
#   add_executable(server main.c ...)
#   target_link_libraries(server core)                      # plain or keyword signature
#   hottext_optimize(server META hottext/server.meta)
#
# hottext_optimize(<target>
#     META <file>                     meta file written by `hottext pipeline run` or
#                                     `hottext store put --meta` (required)
#     [LINKER bfd|gold|lld]           the linker to link with (-fuse-ld; default bfd), which
#                                     picks the input: bfd and lld a linker script (-T), gold a
#                                     section order file and the markers object
#     [RUNTIME none|static|auto]      none (default); static: link libhottext.a, call
#                                     hugify_self() in main(); auto: link the constructor variant,
#                                     no code change
#     [ON_MISSING fail|warn]          no usable profile: fail the build (default, as in the paper)
#                                     or build unoptimised with a loud warning
#     [STORE <url>]                   fetch from this store instead of the meta file's
#     [MIN_MATCHED <fraction>]        refuse a profile less than this much of which matches (0.5)
#     [LIBRARIES <library>...]        the static (or object) libraries to compile with the flags
#                                     below, instead of all that <target> links (see below)
#     [CLUSTERS <file>])              a cluster file for clang's basic-block sections (`hottext
#                                     order --format clang-bb-sections`): the C and C++ sources
#                                     clang compiles get -fbasic-block-sections=list=<file> and
#                                     recompile when it changes; gcc has none (configure says so)
#
# What it does to <target>:
# - compiles it with -ffunction-sections -fno-omit-frame-pointer (each function in its own
#   section, stack samples with callers), and with it every static and object library of this
#   project that <target> links, directly or through other libraries (found at the end of the
#   top-level CMakeLists.txt, so the order of the calls does not matter; configure prints them).
#   Their code is linked into the executable: a function of a library compiled without
#   -ffunction-sections cannot be moved, and the profile's functions in it would count as gone
#   at the next build. Imported and shared libraries are left alone (not this project's code, or
#   not in the executable). LIBRARIES names the libraries instead, for libraries linked through
#   generator expressions (configure names the link items it could not follow) or to leave one out;
# - links it through a launcher (hottext_link.sh as <LANG>_LINKER_LAUNCHER, after any launcher
#   the target had) that runs the target's own link command twice over: once into the
#   "probe" (unresolved symbols allowed), then `hottext fetch --binary probe`, which fetches the
#   profile by hash, checks it and writes the ordering input, then the real link with it. The
#   probe is thus the real link line: the target's objects, its libraries, its options. Then
#   `hottext verify --binary <target> --planned <input>` checks that every planned function is
#   in the hot range and that the runtime can map it: on a failure, ON_MISSING fail fails the
#   link (and removes the binary), warn says so in the build log;
# - relinks it when the meta file changes;
# - links the runtime by appending to its LINK_LIBRARIES property, which works whichever
#   target_link_libraries signature (plain or keyword) the project uses for it.
# It leaves code alignment alone; docs/build.md recommends -falign-jumps=1 -falign-loops=1
# -falign-labels=1 for hot code (measured there), to add with target_compile_options.
# Needs the Makefile or Ninja generators (the linker launcher) and CMake 3.21.
#
# Variables: HOTTEXT_EXECUTABLE (the hottext command), HOTTEXT_RUNTIME_LIBRARY (libhottext.a),
# HOTTEXT_RUNTIME_AUTO_LIBRARY (libhottext_auto.a), HOTTEXT_INCLUDE_DIR (hottext.h). Set them to
# override the search, which looks in this source tree first (target/release, runtime/build).

if(CMAKE_VERSION VERSION_LESS 3.21)
  message(FATAL_ERROR "hottext.cmake needs CMake 3.21 or newer (for <LANG>_LINKER_LAUNCHER); "
                      "this is CMake ${CMAKE_VERSION}")
endif()
# The policies of 3.21 for this file and the functions it defines; include() and find_package()
# give it a policy scope of its own, so the project's policies stay as they were.
cmake_policy(VERSION 3.21)

if(DEFINED _HOTTEXT_CMAKE_INCLUDED)
  return()
endif()
set(_HOTTEXT_CMAKE_INCLUDED TRUE)
set(_HOTTEXT_CMAKE_DIR "${CMAKE_CURRENT_LIST_DIR}")
set(_HOTTEXT_COMPILE_FLAGS -ffunction-sections -fno-omit-frame-pointer)
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
find_program(HOTTEXT_BASH bash DOC "bash, which runs hottext_link.sh")

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
  cmake_parse_arguments(PARSE_ARGV 1 HT ""
                        "META;LINKER;RUNTIME;ON_MISSING;STORE;MIN_MATCHED;CLUSTERS" "LIBRARIES")
  set(where "hottext_optimize(${target})")
  if(HT_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "${where}: unknown arguments ${HT_UNPARSED_ARGUMENTS}")
  endif()
  if(NOT HT_META)
    message(FATAL_ERROR "${where}: META <file> is required")
  endif()
  if(NOT HOTTEXT_EXECUTABLE)
    message(FATAL_ERROR "${where}: no hottext command (HOTTEXT_EXECUTABLE)")
  endif()
  if(NOT HOTTEXT_BASH)
    message(FATAL_ERROR "${where}: no bash, which runs the link launcher (HOTTEXT_BASH)")
  endif()
  if(NOT TARGET ${target})
    message(FATAL_ERROR "${where}: no target ${target}: call it after add_executable(${target} ...)")
  endif()
  get_target_property(type ${target} TYPE)
  if(NOT type STREQUAL "EXECUTABLE")
    message(FATAL_ERROR "${where}: ${target} is a ${type}; the hot range is an executable's")
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

  set(compile_flags ${_HOTTEXT_COMPILE_FLAGS})
  set(clusters "")
  if(HT_CLUSTERS)
    get_filename_component(clusters "${HT_CLUSTERS}" ABSOLUTE
                           BASE_DIR "${CMAKE_CURRENT_SOURCE_DIR}")
    _hottext_cluster_flags("${where}" "${clusters}" cluster_flags)
    list(APPEND compile_flags ${cluster_flags})
    _hottext_compile_depends(${target} "${clusters}")
  endif()
  target_compile_options(${target} PRIVATE ${compile_flags})
  # At the end of the top-level directory, when every library and target_link_libraries exists.
  cmake_language(EVAL CODE "cmake_language(DEFER DIRECTORY [[${CMAKE_SOURCE_DIR}]]
    CALL _hottext_compile_libraries [[${where}]] [[${target}]] [[${HT_LIBRARIES}]]
         [[${compile_flags}]] [[${clusters}]])")

  # -fuse-ld picks the linker the input is for. gcc finds ld.lld on PATH or in a -B directory
  # (Debian's lld-19: target_link_options(<target> PRIVATE -B/usr/lib/llvm-19/bin)).
  # -Xlinker rather than -Wl, so that a build directory with a comma in its path works.
  if(HT_LINKER STREQUAL "bfd" OR HT_LINKER STREQUAL "lld")
    set(format ld-script)
    set(input "${dir}/hot.ld")
    set(ordering -Xlinker -T -Xlinker "${input}")
    set(markers_args "")
  elseif(HT_LINKER STREQUAL "gold")
    set(format gold-order)
    set(input "${dir}/order.txt")
    set(ordering -Xlinker "--section-ordering-file=${input}" "${dir}/hot_markers.o")
    set(markers_args --markers "${dir}/hot_markers.o")
  else()
    message(FATAL_ERROR "${where}: LINKER must be bfd, gold or lld")
  endif()
  target_link_options(${target} PRIVATE "-fuse-ld=${HT_LINKER}")

  set(store_args "")
  if(HT_STORE)
    set(store_args --store "${HT_STORE}")
  endif()

  set(probe "${dir}/probe")
  set(launcher "${HOTTEXT_BASH}" "${_HOTTEXT_CMAKE_DIR}/hottext_link.sh" "${probe}")
  foreach(arg IN LISTS ordering)
    list(APPEND launcher --add "${arg}")
  endforeach()
  list(APPEND launcher --verify "${input}" ${HT_ON_MISSING})
  list(APPEND launcher "${HOTTEXT_EXECUTABLE}" fetch --meta "${meta}" --binary "${probe}"
       --format ${format} -o "${input}" ${markers_args} ${store_args}
       --on-missing ${HT_ON_MISSING} --min-matched ${HT_MIN_MATCHED} --)
  foreach(lang C CXX)
    get_target_property(previous ${target} ${lang}_LINKER_LAUNCHER)
    if(NOT previous)
      set(previous "")
    endif()
    set_property(TARGET ${target} PROPERTY ${lang}_LINKER_LAUNCHER ${launcher} ${previous})
  endforeach()

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
  set_property(TARGET ${target} APPEND PROPERTY LINK_DEPENDS
               "${copy}" "${HOTTEXT_EXECUTABLE}" "${_HOTTEXT_CMAKE_DIR}/hottext_link.sh")

  # The LINK_LIBRARIES property rather than target_link_libraries, which refuses to mix its
  # plain and keyword signatures on one target: the project may use either.
  if(HT_RUNTIME STREQUAL "static")
    if(NOT HOTTEXT_RUNTIME_LIBRARY OR NOT HOTTEXT_INCLUDE_DIR)
      message(FATAL_ERROR "${where}: RUNTIME static needs libhottext.a and "
                          "hottext.h (make -C runtime, or set HOTTEXT_RUNTIME_LIBRARY)")
    endif()
    target_include_directories(${target} PRIVATE "${HOTTEXT_INCLUDE_DIR}")
    set_property(TARGET ${target} APPEND PROPERTY LINK_LIBRARIES "${HOTTEXT_RUNTIME_LIBRARY}")
  elseif(HT_RUNTIME STREQUAL "auto")
    if(NOT HOTTEXT_RUNTIME_AUTO_LIBRARY)
      message(FATAL_ERROR "${where}: RUNTIME auto needs libhottext_auto.a "
                          "(make -C runtime, or set HOTTEXT_RUNTIME_AUTO_LIBRARY)")
    endif()
    get_filename_component(libdir "${HOTTEXT_RUNTIME_AUTO_LIBRARY}" DIRECTORY)
    # libhottext_auto.a is a linker script naming hottext_auto.o and libhottext.a beside it.
    target_link_options(${target} PRIVATE "-L${libdir}")
    set_property(TARGET ${target} APPEND PROPERTY LINK_LIBRARIES hottext_auto)
  elseif(NOT HT_RUNTIME STREQUAL "none")
    message(FATAL_ERROR "${where}: RUNTIME must be none, static or auto")
  endif()
endfunction()

# Sets `out` to -fbasic-block-sections=list=`clusters` for the languages clang compiles (a
# generator expression each), and says which compilers have no basic-block sections.
function(_hottext_cluster_flags where clusters out)
  set(flags "")
  foreach(lang C CXX)
    set(id "${CMAKE_${lang}_COMPILER_ID}")
    if(id STREQUAL "Clang")
      list(APPEND flags
           "$<$<COMPILE_LANG_AND_ID:${lang},Clang>:-fbasic-block-sections=list=${clusters}>")
    elseif(id)
      message(STATUS "hottext: ${where}: CLUSTERS not used for ${lang}: ${id} has no "
                     "basic-block sections (clang has), so its hot functions stay whole")
    endif()
  endforeach()
  set(${out} "${flags}" PARENT_SCOPE)
endfunction()

# Recompiles `target`'s C and C++ sources when the cluster file `clusters` changes.
function(_hottext_compile_depends target clusters)
  get_target_property(sources ${target} SOURCES)
  get_target_property(source_dir ${target} SOURCE_DIR)
  list(FILTER sources INCLUDE REGEX "\\.(c|cc|cpp|cxx|C)$")
  # Absolute, since the deferred call runs in the top-level directory.
  list(TRANSFORM sources PREPEND "${source_dir}/" REGEX "^[^/]")
  if(sources)
    set_property(SOURCE ${sources} TARGET_DIRECTORY ${target}
                 APPEND PROPERTY OBJECT_DEPENDS "${clusters}")
  endif()
endfunction()

# The deferred half of hottext_optimize: compiles the static and object libraries that `named`
# lists, or else those of this project that `target` links, with `flags`, and says so; with a
# cluster file, their sources recompile when it changes.
function(_hottext_compile_libraries where target named flags clusters)
  if(named)
    _hottext_named_libraries("${where}" libraries ${named})
    set(unfollowed "")
  else()
    _hottext_linked_libraries(${target} libraries unfollowed)
  endif()
  foreach(library IN LISTS libraries)
    target_compile_options(${library} PRIVATE ${flags})
    if(clusters)
      _hottext_compile_depends(${library} "${clusters}")
    endif()
  endforeach()
  list(JOIN _HOTTEXT_COMPILE_FLAGS " " flags)
  if(libraries)
    list(JOIN libraries ", " names)
    message(STATUS "hottext: ${target}: ${flags} also on ${names}")
  else()
    message(STATUS "hottext: ${target}: links no static library of this project")
  endif()
  if(unfollowed)
    message(STATUS "hottext: ${target}: link items not followed (generator expressions): "
                   "${unfollowed}; name a static library of this project among them with "
                   "hottext_optimize(${target} ... LIBRARIES ...)")
  endif()
endfunction()

# Sets `out` to the named libraries (aliases resolved); fails configure unless each is a static
# or object library this project builds.
function(_hottext_named_libraries where out)
  set(libraries "")
  foreach(library IN LISTS ARGN)
    if(NOT TARGET "${library}")
      message(FATAL_ERROR "${where}: LIBRARIES ${library}: no such target")
    endif()
    _hottext_library_kind("${library}" library ours follow)
    if(NOT ours)
      message(FATAL_ERROR "${where}: LIBRARIES ${library}: not a static or object library built "
                          "by this project; only those have code in the executable to compile "
                          "with -ffunction-sections")
    endif()
    list(APPEND libraries "${library}")
  endforeach()
  set(${out} "${libraries}" PARENT_SCOPE)
endfunction()

# For a target: `name` resolved if an alias; whether it is a static or object library this
# project builds (`ours`); whether what it links goes into the executable too (`follow`: not
# for a shared library, whose dependencies are linked into it).
function(_hottext_library_kind library name ours follow)
  get_target_property(aliased "${library}" ALIASED_TARGET)
  if(aliased)
    set(library "${aliased}")
  endif()
  get_target_property(type "${library}" TYPE)
  get_target_property(imported "${library}" IMPORTED)
  set(is_ours FALSE)
  if(NOT imported AND type MATCHES "^(STATIC|OBJECT)_LIBRARY$")
    set(is_ours TRUE)
  endif()
  set(is_followed FALSE)
  if(type MATCHES "^(STATIC|OBJECT|INTERFACE)_LIBRARY$")
    set(is_followed TRUE)
  endif()
  set(${name} "${library}" PARENT_SCOPE)
  set(${ours} ${is_ours} PARENT_SCOPE)
  set(${follow} ${is_followed} PARENT_SCOPE)
endfunction()

# Sets `out` to this project's static and object libraries that `target` links, directly or
# through other libraries, and `out_unfollowed` to the link items it could not read.
function(_hottext_linked_libraries target out out_unfollowed)
  get_target_property(queue ${target} LINK_LIBRARIES)
  if(NOT queue)
    set(queue "")
  endif()
  set(seen "")
  set(libraries "")
  set(unfollowed "")
  list(LENGTH queue pending)
  while(pending GREATER 0)
    list(POP_FRONT queue item)
    # A static library's private dependencies are in its interface as $<LINK_ONLY:name>.
    if(item MATCHES "^\\$<LINK_ONLY:([^$<>]+)>$")
      set(item "${CMAKE_MATCH_1}")
    endif()
    if(item MATCHES "^::@")
      # CMake's markers around items linked from another directory.
    elseif(item MATCHES "\\$<")
      list(APPEND unfollowed "${item}")
    elseif(TARGET "${item}")
      _hottext_library_kind("${item}" item ours follow)
      if(NOT item IN_LIST seen)
        list(APPEND seen "${item}")
        if(ours)
          list(APPEND libraries "${item}")
        endif()
        get_target_property(interface "${item}" INTERFACE_LINK_LIBRARIES)
        if(follow AND interface)
          list(APPEND queue ${interface})
        endif()
      endif()
    endif()
    # Anything else is a file or a flag (libm.a, -lz): no target whose flags could be set.
    list(LENGTH queue pending)
  endwhile()
  set(${out} "${libraries}" PARENT_SCOPE)
  set(${out_unfollowed} "${unfollowed}" PARENT_SCOPE)
endfunction()

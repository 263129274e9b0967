# Copies SRC to DST only when the content differs (an absent SRC counts as empty), so that a
# target that lists DST in LINK_DEPENDS relinks exactly when the meta file changes.
# cmake -DSRC=... -DDST=... -P hottext_sync_meta.cmake
set(new "")
if(EXISTS "${SRC}")
  file(READ "${SRC}" new)
endif()
set(old "")
if(EXISTS "${DST}")
  file(READ "${DST}" old)
endif()
if(NOT EXISTS "${DST}" OR NOT new STREQUAL old)
  file(WRITE "${DST}" "${new}")
endif()

# Fails when a generated doc (DOC) differs from what `taas-kernel FLAG` prints now:
# docs/language.md (--doc), docs/errors.md (--errors).
if(NOT FLAG)
  set(FLAG --doc)
endif()
execute_process(COMMAND ${KERNEL} ${FLAG} OUTPUT_VARIABLE generated RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "taas-kernel ${FLAG} failed (${rc})")
endif()
file(READ ${DOC} committed)
if(NOT generated STREQUAL committed)
  message(FATAL_ERROR "${DOC} is out of date: regenerate it with\n  taas-kernel ${FLAG} > ${DOC}")
endif()

# Fails when docs/language.md differs from what `taas-kernel --doc` prints now.
execute_process(COMMAND ${KERNEL} --doc OUTPUT_VARIABLE generated RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "taas-kernel --doc failed (${rc})")
endif()
file(READ ${DOC} committed)
if(NOT generated STREQUAL committed)
  message(FATAL_ERROR "docs/language.md is out of date: regenerate it with\n  taas-kernel --doc > docs/language.md")
endif()

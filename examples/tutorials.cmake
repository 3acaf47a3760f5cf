# The tutorials' complete programs. A ```c block of docs/tutorials/*.md whose
# first line is `// tutorial: NAME [ARGS...]` is one program: at configure
# time it is written to tutorials/NAME.c (with #line directives, so compiler
# messages point into the .md file), built against the library like an
# example, and run as the CTest test tutorials.NAME with ARGS on a few
# batches (CTRAINER_LIMIT_BATCHES=3), and with MPI also on 2 processes by
# `ctrainer launch` (tutorials.NAME_launch_np2: it must print its test
# accuracy once). Every other ```c block is an excerpt of a compiled program
# ("// from: examples/X.c" or "// from: tutorial NAME"): the CTest test
# snippets.tutorials (snippet_check.awk) fails, naming the block's file:line,
# when an excerpt is no longer in its source or a block names no source;
# snippets.check tests that checker. Editing a tutorial re-runs CMake.
file(GLOB TUTORIAL_DOCS CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/docs/tutorials/*.md)
set(TUTORIAL_DIR ${CMAKE_CURRENT_BINARY_DIR}/tutorials)
file(MAKE_DIRECTORY ${TUTORIAL_DIR})
foreach(doc ${TUTORIAL_DOCS})
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${doc})
  execute_process(
    COMMAND awk -v dir=${TUTORIAL_DIR} -v doc=${doc} -f
      ${CMAKE_CURRENT_SOURCE_DIR}/tutorial_snippets.awk ${doc}
    RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "tutorials: extracting the programs of ${doc} failed")
  endif()
  file(STRINGS ${doc} markers REGEX "^// tutorial: ")
  foreach(marker ${markers})
    string(REGEX REPLACE "^// tutorial: ([A-Za-z0-9_]+) *(.*)$" "\\1" name "${marker}")
    string(REGEX REPLACE "^// tutorial: ([A-Za-z0-9_]+) *(.*)$" "\\2" args "${marker}")
    separate_arguments(args UNIX_COMMAND "${args}")
    if(TARGET tutorial_${name})
      message(FATAL_ERROR "tutorials: two programs named '${name}' (${doc})")
    endif()
    add_executable(tutorial_${name} ${TUTORIAL_DIR}/${name}.c)
    target_link_libraries(tutorial_${name} PRIVATE ctrainer_static)
    if(CTRAINER_BUILD_TESTS)
      add_test(NAME tutorials.${name} COMMAND tutorial_${name} ${args})
      set_tests_properties(tutorials.${name} PROPERTIES TIMEOUT 120 ENVIRONMENT
        "CTRAINER_LIMIT_BATCHES=3;OMP_NUM_THREADS=2;OPENBLAS_NUM_THREADS=1")
    endif()
    if(CTRAINER_BUILD_TESTS AND CTRAINER_HAVE_MPI)
      add_test(NAME tutorials.${name}_launch_np2
        COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/launch_test.sh $<TARGET_FILE:ctrainer_cli>
          $<TARGET_FILE:tutorial_${name}> ${args})
      set_tests_properties(tutorials.${name}_launch_np2 PROPERTIES TIMEOUT 120
        ENVIRONMENT "${EXAMPLE_LAUNCH_ENV}")
    endif()
  endforeach()
endforeach()
# Guides outside docs/tutorials/ whose ```c blocks are all excerpts, checked
# by the same test.
set(SNIPPET_GUIDES ${PROJECT_SOURCE_DIR}/docs/cuda.md)
if(CTRAINER_BUILD_TESTS)
  add_test(NAME snippets.tutorials
    COMMAND awk -v root=${PROJECT_SOURCE_DIR} -v tutorials=${TUTORIAL_DIR}
      -f ${CMAKE_CURRENT_SOURCE_DIR}/snippet_check.awk ${TUTORIAL_DOCS} ${SNIPPET_GUIDES})
  add_test(NAME snippets.check
    COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/snippet_check_test.sh
      ${CMAKE_CURRENT_SOURCE_DIR}/snippet_check.awk
      ${PROJECT_SOURCE_DIR}/tests/fixtures/snippets)
endif()

# drt-conformance --failures-dir creates a directory that does not exist yet
# and writes the minimal failing scenario there, replayable with the printed
# command; a directory that cannot be created is an error before any run.
#   cmake -DCONFORMANCE=... -DREPLAY=... -DWORK=... -P CheckFailuresDir.cmake
file(REMOVE_RECURSE ${WORK})
file(MAKE_DIRECTORY ${WORK})
set(dir ${WORK}/not/yet/there)
execute_process(
  COMMAND ${CONFORMANCE} --backend mutant:accounting-drift
          --filter view-sharing --fail-fast --failures-dir ${dir}
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 1)
  message(FATAL_ERROR "expected the suite to fail on the mutant (exit 1), "
                      "got ${rc}:\n${out}${err}")
endif()
# One minimal scenario per configuration the mutant failed in.
file(GLOB written ${dir}/*.scn)
if(NOT written)
  message(FATAL_ERROR "expected a scenario in ${dir}, found none:\n${out}")
endif()
string(REGEX MATCH "replay: drt-replay [^\n]*" replay "${out}")
string(REGEX REPLACE "^replay: drt-replay " "" arguments "${replay}")
separate_arguments(arguments UNIX_COMMAND "${arguments}")
execute_process(COMMAND ${REPLAY} ${arguments} RESULT_VARIABLE rc
                OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 1)
  message(FATAL_ERROR "the printed replay command (${replay}) should fail "
                      "again on the mutant, got ${rc}:\n${out}${err}")
endif()

# A path below a regular file cannot become a directory.
file(WRITE ${WORK}/a-file "")
execute_process(
  COMMAND ${CONFORMANCE} --backend fake --filter view-sharing
          --failures-dir ${WORK}/a-file/below
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 2 OR NOT err MATCHES "cannot create the directory"
   OR out MATCHES "view-sharing on")
  message(FATAL_ERROR "expected exit 2 naming the directory before any run, "
                      "got ${rc}:\n${out}${err}")
endif()

# A mutant whose patch no longer applies must fail its own test with the
# reason, and must not break the build: applies a patch written against code
# that does not exist, then runs CheckMutant.sh on the result.
#   cmake -DSRC=<framework dir> -DWORK=<dir> -DPATCH=<file> -DCHECK=<script>
#         -DCONFORMANCE=<drt-conformance> -DREPLAY=<drt-replay>
#         -P CheckStaleMutant.cmake
file(REMOVE_RECURSE ${WORK})
execute_process(
  COMMAND ${CMAKE_COMMAND} -DSRC=${SRC} -DDST=${WORK} -DPATCH=${PATCH}
          -P ${CMAKE_CURRENT_LIST_DIR}/ApplyMutant.cmake
  RESULT_VARIABLE applied)
if(NOT applied EQUAL 0)
  message(FATAL_ERROR "ApplyMutant.cmake failed (${applied}) instead of recording the stale patch")
endif()
if(NOT EXISTS ${WORK}/PATCH_FAILED)
  message(FATAL_ERROR "a stale patch left no PATCH_FAILED marker")
endif()
execute_process(
  COMMAND bash ${CHECK} stale fake fake ${WORK} ${WORK}/run ${CONFORMANCE}
          ${REPLAY}
  RESULT_VARIABLE checked
  OUTPUT_VARIABLE output
  ERROR_VARIABLE output)
if(checked EQUAL 0)
  message(FATAL_ERROR "CheckMutant.sh passed a mutant whose patch does not apply")
endif()
if(NOT output MATCHES "does not apply")
  message(FATAL_ERROR "CheckMutant.sh did not say why:\n${output}")
endif()
message(STATUS "a stale mutant fails its test: ${output}")

# The two tiers of the suite (docs/testing.md, "Tiers"), in one place.
#
# The gate is every test not named here: scripts/test runs it, and CI runs
# scripts/test. The long tier is the gate and these: scripts/test --long.
# Each of these gets the label "long"; why each is there (and what in the
# gate covers the same capability) is in docs/testing.md's table, which
# tests/tiers_check compares with this list.
set(NODEVOL_LONG_TESTS
  vm_lvm_crash_all                   # every kill -9 round; the gate runs one of each kind
  vm_nfs_crash                       # kill -9 rounds on NFS
  vm_power_loss_ops                  # a power cut at a random moment of a stream
  vm_lvm_faults                      # fault rounds: I/O errors, hung PVs, frozen disks
  vm_csi_sanity_lvm                  # a conformance suite (csi-sanity) on LVM
  vm_csi_sanity_thick_nfs            # a conformance suite (csi-sanity) on thick LVM and NFS
  k8s_provisioner_apiserver_faults   # fault rounds against the apiserver
  k8s_provisioner_clock_jump         # fault rounds: clock jumps
  k8s_provisioner_node_cutoff        # fault rounds: a node cut off
  k8s_provisioner_multinode_scale    # scale: many pretend nodes
  k8s_many_pods                      # soak: many pods on one node
  k8s_oldest_smoke                   # the oldest supported Kubernetes release
  k8s_oldest_provisioner             # the oldest supported Kubernetes release
  k8s_oldest_csi                     # the oldest supported Kubernetes release
  k8s_oldest_scheduling              # the oldest supported Kubernetes release
  vm_package_upgrade_old             # builds the previous release from history
)

# Every test's TIMEOUT, times NODEVOL_TIMEOUT_PERCENT / 100: scripts/test
# measures how fast this machine is now (tests/speed) and configures it,
# so that a machine half as fast, or one with a CPU taken by other work,
# fails no test by time alone. vm-run scales its own --timeout by the same
# figure (the environment's NODEVOL_TIMEOUT_PERCENT).
set(NODEVOL_TIMEOUT_PERCENT 100 CACHE STRING "percent applied to every test's TIMEOUT (scripts/test sets it from tests/speed)")
if(NOT NODEVOL_TIMEOUT_PERCENT MATCHES "^[1-9][0-9]*$")
  message(FATAL_ERROR "NODEVOL_TIMEOUT_PERCENT must be a whole number of percent, not '${NODEVOL_TIMEOUT_PERCENT}'")
endif()

# The script tests start through tests/cpu-meter, which records the CPU
# each one takes (scripts/test prints the table, docs/reliability.md keeps
# it); it finds the test's name in NODEVOL_TEST_NAME, set below.
set(NODEVOL_METER ${PROJECT_SOURCE_DIR}/tests/cpu-meter --)

# Called at the end of each tests/ directory's CMakeLists.txt: test
# properties can be set only in the directory that added the test.
function(nodevol_tiers)
  get_directory_property(tests TESTS)
  foreach(t IN LISTS tests)
    if(t IN_LIST NODEVOL_LONG_TESTS)
      set_property(TEST ${t} APPEND PROPERTY LABELS long)
    endif()
    set_property(TEST ${t} APPEND PROPERTY ENVIRONMENT NODEVOL_TEST_NAME=${t})
    get_test_property(${t} TIMEOUT timeout)
    if(timeout)
      math(EXPR timeout "${timeout} * ${NODEVOL_TIMEOUT_PERCENT} / 100")
      set_tests_properties(${t} PROPERTIES TIMEOUT ${timeout})
    endif()
  endforeach()
endfunction()

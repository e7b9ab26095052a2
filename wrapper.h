/* Input of build.rs's bindgen run (the L2 interposer's aclnn wrappers, issue 4). For now it
 * names the recorder's own ABI so the generator has one place to start from. */
#include "include/msprobe.h"

// rl-relay: holds the newest weight version and serves UCX pulls of it. See man/rl-relay.1.
#include "rl/weights/cli.h"

int main(int argc, char** argv) { return rl::weights::RelayMain(argc, argv); }

/*
 * test_read_balloon.c - the READ strategy's test for a VM whose
 * virtio-balloon reports free pages to its host (src/load/read.c
 * pi_free_page_reporting; READ's buffers then get 4 KiB pages). White-box:
 * includes src/load/load.h and points pi_test_virtio_dir at a made-up
 * sysfs directory: only a balloon (device 0x0005) with feature bit 5
 * (VIRTIO_BALLOON_F_REPORTING) counts; other devices with bit 5, a balloon
 * without it, no virtio bus (bare metal, most containers) do not.
 */
#include "test.h"

#include "../src/load/load.h"

#include <sys/stat.h>
#include <unistd.h>

static void dev(const char *root, const char *name, const char *id, const char *features) {
    char p[4400];
    snprintf(p, sizeof p, "%s/%s", root, name);
    mkdir(p, 0700);
    snprintf(p, sizeof p, "%s/%s/device", root, name);
    CHECK_EQ(pt_write_file(p, id, strlen(id)), 0);
    snprintf(p, sizeof p, "%s/%s/features", root, name);
    CHECK_EQ(pt_write_file(p, features, strlen(features)), 0);
}

TEST(read_balloon_reporting_detection) {
    /* bits as sysfs prints them: one character a feature bit, bit 0 first */
    const char *bit5 = "0000010000000000000000000000000000000000000000000000000000000000\n";
    const char *no5 = "1111101111111111000000000000000000000000000000000000000000000000\n";
    char root[4096];
    snprintf(root, sizeof root, "%s", pt_tmppath("virtio"));
    mkdir(root, 0700);

    pi_test_virtio_dir = pt_tmppath("no-such-bus"); /* bare metal, a container without /sys/bus/virtio */
    CHECK_EQ(pi_free_page_reporting(), 0);
    pi_test_virtio_dir = root;
    CHECK_EQ(pi_free_page_reporting(), 0); /* an empty bus */
    dev(root, "virtio0", "0x0001\n", bit5); /* a network device: bit 5 is another feature there */
    dev(root, "virtio1", "0x0002\n", bit5); /* a block device */
    CHECK_EQ(pi_free_page_reporting(), 0);
    dev(root, "virtio2", "0x0005\n", no5); /* a balloon that does not report free pages */
    CHECK_EQ(pi_free_page_reporting(), 0);
    dev(root, "virtio3", "0x0005\n", "00001\n"); /* too short to hold bit 5 */
    CHECK_EQ(pi_free_page_reporting(), 0);
    dev(root, "virtio4", "0x0005\n", bit5); /* a reporting balloon */
    CHECK_EQ(pi_free_page_reporting(), 1);
    pi_test_virtio_dir = NULL;
    int real = pi_free_page_reporting();
    CHECK(real == 0 || real == 1);
    return PASS;
}

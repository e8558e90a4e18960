import Testing
@testable import TimerdSystem

@Suite struct CgroupTests {
    static let hybrid = """
        31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
        35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
        41 31 0:38 / /sys/fs/cgroup/unified rw,relatime shared:9 - cgroup2 cgroup2 rw
        """
    static let unified = """
        22 1 0:21 / / rw,relatime - ext4 /dev/sda1 rw
        30 22 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 rw,nsdelegate
        """

    @Test func theOwnCgroupIsTheUnifiedMountPlusTheZeroLinePath() {
        let cgroup = "9:name=systemd:/system.slice/timerd.service\n0::/system.slice/timerd.service\n"
        #expect(CgroupHierarchy.directory(mountinfo: Self.unified, cgroupFile: cgroup)?.path
            == "/sys/fs/cgroup/system.slice/timerd.service")
        #expect(CgroupHierarchy.directory(mountinfo: Self.hybrid, cgroupFile: cgroup)?.path
            == "/sys/fs/cgroup/unified/system.slice/timerd.service")
        #expect(CgroupHierarchy.unifiedPath(cgroupFile: cgroup) == "/system.slice/timerd.service")
    }

    @Test func theRootCgroupAndNoHierarchy() {
        #expect(CgroupHierarchy.directory(mountinfo: Self.hybrid, cgroupFile: "0::/\n")?.path == "/sys/fs/cgroup/unified")
        #expect(CgroupHierarchy.isRoot(cgroupFile: "4:memory:/x\n0::/\n"))
        // cgroup v1 only: no 0:: line, or no cgroup2 mount.
        #expect(CgroupHierarchy.directory(mountinfo: Self.hybrid, cgroupFile: "4:memory:/x\n") == nil)
        #expect(CgroupHierarchy.directory(mountinfo: "31 23 0:28 / /sys/fs/cgroup rw - tmpfs tmpfs rw\n", cgroupFile: "0::/a\n") == nil)
    }

    @Test func aMountOfASubtreeIsLookedUpRelativeToItsRoot() {
        // A cgroup2 mount whose root is /machine.slice (as seen from outside a cgroup namespace).
        let mountinfo = "50 22 0:26 /machine.slice /mnt/cg rw - cgroup2 cgroup2 rw\n"
        #expect(CgroupHierarchy.directory(mountinfo: mountinfo, cgroupFile: "0::/machine.slice/c1\n")?.path == "/mnt/cg/c1")
        #expect(CgroupHierarchy.directory(mountinfo: mountinfo, cgroupFile: "0::/machine.slice\n")?.path == "/mnt/cg")
        #expect(CgroupHierarchy.directory(mountinfo: mountinfo, cgroupFile: "0::/other\n") == nil)
    }

    @Test func mountPointsWithEscapedSpaces() {
        let mountinfo = "50 22 0:26 / /mnt/my\\040cgroups rw - cgroup2 cgroup2 rw\n"
        #expect(CgroupHierarchy.directory(mountinfo: mountinfo, cgroupFile: "0::/a\n")?.path == "/mnt/my cgroups/a")
        #expect(CgroupHierarchy.unescape("a\\011b\\134c") == "a\tb\\c")
    }

    @Test func keyedFilesAndAbsentOnes() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        // A plain directory with files of the same shape stands in for a cgroup's.
        try FileSystem.writeAtomically(directory.path + "/cgroup.events", "populated 0\nfrozen 0\n")
        try FileSystem.writeAtomically(directory.path + "/cpu.stat", "usage_usec 1234567\nuser_usec 1000000\nsystem_usec 234567\n")
        try FileSystem.writeAtomically(directory.path + "/cgroup.procs", "12\n34\n")
        let cgroup = CgroupDirectory(path: directory.path)
        #expect(try cgroup.isPopulated() == false)
        #expect(cgroup.cpuUsage() == .microseconds(1_234_567))
        #expect(try cgroup.processes() == [12, 34])
        #expect(cgroup.has("cgroup.events") && !cgroup.has("cgroup.kill"))
        #expect(CgroupDirectory(path: directory.path + "/nope").cpuUsage() == nil)
        #expect(throws: Errno.self) { try CgroupDirectory(path: directory.path + "/nope").isPopulated() }
    }

    @Test func aKeysNumberIsItsWholeLinesValue() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        // A key that is a prefix of another's, a value that is not a number, a last line without "\n".
        try FileSystem.writeAtomically(directory.path + "/cpu.stat", "usage_usec_x 7\nusage_usec 42\nname max\nlast 9")
        let cgroup = CgroupDirectory(path: directory.path)
        #expect(try cgroup.number("usage_usec", in: "cpu.stat") == 42)
        #expect(try cgroup.number("usage", in: "cpu.stat") == nil)
        #expect(try cgroup.number("name", in: "cpu.stat") == nil)
        #expect(try cgroup.number("last", in: "cpu.stat") == 9)
        #expect(try cgroup.number("absent", in: "cpu.stat") == nil)
        // The populated flag of a file that does not say is taken as populated (nothing is removed then).
        try FileSystem.writeAtomically(directory.path + "/cgroup.events", "frozen 0\n")
        #expect(try cgroup.isPopulated())
    }
}

import Glibc
import Testing
import TimerdSystem

/// Spawning as another user. Changing identity needs root, so these run only as root.
@Suite(.enabled(if: getuid() == 0, "changing a child's identity needs root"))
struct SpawnAsUserTests {
    /// nobody's account, from the user database (uid 65534 on Debian).
    let nobody: UserAccount

    init() throws {
        nobody = try #require(try UserAccount.lookup(name: "nobody"))
    }

    @Test func idsOfNobodyWithItsOwnGroups() throws {
        let credentials = try Credentials(account: nobody)
        #expect(credentials.groups.first == nobody.gid)
        let result = try run("/bin/sh", ["-c", "id -u; id -g; id -G"], credentials: credentials)
        #expect(result.status.isSuccess)
        let lines = result.output.split(separator: "\n")
        try #require(lines.count == 3, "output: \(result.output)")
        #expect(lines[0] == "\(nobody.uid)")
        #expect(lines[1] == "\(nobody.gid)")
        #expect(Set(lines[2].split(separator: " ").map(String.init)) == Set(credentials.groups.map { "\($0)" }))
    }

    @Test func exactlyTheGivenSupplementaryGroups() throws {
        let listed = try run(
            "/usr/bin/id", ["-G"], credentials: Credentials(uid: nobody.uid, gid: nobody.gid, groups: [4242, 100, 7]))
        let ids = Set(listed.output.split(whereSeparator: { $0 == " " || $0 == "\n" }))
        #expect(ids == ["\(nobody.gid)", "4242", "100", "7"])
        // An empty list drops every group, root's 0 included: only the primary group is left.
        let none = try run(
            "/usr/bin/id", ["-G"], credentials: Credentials(uid: nobody.uid, gid: nobody.gid, groups: []))
        #expect(none.output == "\(nobody.gid)\n")
    }

    @Test func realEffectiveSavedAndFilesystemIdsAreAllTheTargetAndNoCapabilityIsLeft() throws {
        let credentials = Credentials(uid: nobody.uid, gid: nobody.gid, groups: [nobody.gid, 4242])
        // The child reads its own status: cat's process is the spawned one (exec keeps the ids).
        let result = try run("/bin/cat", ["/proc/self/status"], credentials: credentials)
        #expect(result.status.isSuccess)
        let status = parseStatus(result.output)
        #expect(status["Uid"] == Array(repeating: "\(nobody.uid)", count: 4))
        #expect(status["Gid"] == Array(repeating: "\(nobody.gid)", count: 4))
        #expect(Set(status["Groups"] ?? []) == ["\(nobody.gid)", "4242"])
        for field in ["CapInh", "CapPrm", "CapEff", "CapAmb"] {
            #expect(status[field] == ["0000000000000000"], "\(field)")
        }
        // The same child set-up as without credentials: empty mask, no standard signal ignored.
        #expect(status["SigBlk"] == ["0000000000000000"])
        let ignoredField = try #require(status["SigIgn"]?.first)
        let ignored = try #require(UInt64(ignoredField, radix: 16))
        #expect(ignored & 0x7fff_ffff == 0)
    }

    @Test func aRootOnlyFileCannotBeRead() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let secret = try rootOnlyFile(in: directory, "secret", "root only\n", mode: 0o600)
        // The control: the daemon's own identity reads it.
        let asRoot = try run("/bin/cat", [secret])
        #expect(asRoot.output == "root only\n")
        #expect(asRoot.status.isSuccess)

        let asNobody = try run("/bin/cat", [secret], credentials: try Credentials(account: nobody))
        #expect(asNobody.status == .exited(1))
        #expect(asNobody.output.contains("Permission denied"))
        #expect(!asNobody.output.contains("root only"))
    }

    @Test func theWorkingDirectoryIsEnteredWithTheNewIdentity() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        try FileSystem.setPermissions(directory.path, 0o700)
        // The control: root can enter it.
        #expect(try run("/bin/pwd", workingDirectory: directory.path).output == directory.path + "\n")

        let error = #expect(throws: SpawnError.self) {
            try run("/bin/pwd", workingDirectory: directory.path, credentials: try Credentials(account: self.nobody))
        }
        #expect(error?.stage == .workingDirectory)
        #expect(error?.errno == .permissionDenied)
        #expect(
            error?.description
                == "cannot start /bin/pwd: working directory \(directory.path): Permission denied (EACCES)")
    }

    @Test func theProgramIsExecutedWithTheNewIdentity() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let script = try rootOnlyFile(in: directory, "script", "#!/bin/sh\necho ran\n", mode: 0o700)
        #expect(try run(script).output == "ran\n")

        let error = #expect(throws: SpawnError.self) {
            try run(script, credentials: try Credentials(account: self.nobody))
        }
        #expect(error?.stage == .program)
        #expect(error?.errno == .permissionDenied)
    }

    @Test func tooManyGroupsFailTheDropAndNothingRuns() throws {
        // More than NGROUPS_MAX (65536): setgroups refuses with EINVAL in the child. Were that
        // not checked, the command would run as nobody with root's groups.
        let groups = (0...65536).map { UInt32(100_000 + $0) }
        try expectFailedDrop(
            Credentials(uid: nobody.uid, gid: nobody.gid, groups: groups), errno: .invalidArgument)
    }

    @Test func anIncompleteUidChangeIsCaughtByTheVerification() throws {
        // setresuid(-1, -1, -1) succeeds and changes nothing: only reading the ids back shows the
        // child is still root.
        let error = try expectFailedDrop(
            Credentials(uid: UInt32.max, gid: nobody.gid, groups: []), errno: .operationNotPermitted)
        #expect(
            error?.description
                == "cannot start /bin/sh as uid 4294967295 (gid \(nobody.gid)): Operation not permitted (EPERM)")
    }

    @Test func anIncompleteGidChangeIsCaughtByTheVerification() throws {
        // Likewise setresgid(-1, -1, -1): the child would run as nobody in root's group.
        try expectFailedDrop(
            Credentials(uid: nobody.uid, gid: UInt32.max, groups: []), errno: .operationNotPermitted)
    }

    /// Spawns `sh -c "touch <dir>/ran"` in a directory anyone may write to, with `credentials`,
    /// expects the credentials stage to fail with `errno`, and that the command did not run.
    @discardableResult
    private func expectFailedDrop(_ credentials: Credentials, errno: Errno) throws -> SpawnError? {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        try FileSystem.setPermissions(directory.path, 0o777)
        let marker = directory.path + "/ran"
        let error = #expect(throws: SpawnError.self) {
            try run("/bin/sh", ["-c", "touch \(marker)"], credentials: credentials)
        }
        #expect(error?.stage == .credentials)
        #expect(error?.errno == errno)
        #expect(error?.credentials == credentials)
        #expect(!FileSystem.fileExists(marker))
        // The control: the same command with the daemon's identity does create the marker.
        #expect(try run("/bin/sh", ["-c", "touch \(marker)"]).status.isSuccess)
        #expect(FileSystem.fileExists(marker))
        return error
    }
}

/// Without root, no identity can be taken, not even one's own (setgroups needs CAP_SETGID).
@Suite(.enabled(if: getuid() != 0, "as root, changing identity succeeds"))
struct SpawnAsUserWithoutRootTests {
    @Test(arguments: [
        Credentials(uid: 0, gid: 0, groups: [0]),
        Credentials(uid: getuid(), gid: getgid(), groups: [getgid()]),
    ])
    func everyChangeFailsWithEPERM(credentials: Credentials) throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let marker = directory.path + "/ran"
        let error = #expect(throws: SpawnError.self) {
            try run("/bin/sh", ["-c", "touch \(marker)"], credentials: credentials)
        }
        #expect(error?.stage == .credentials)
        #expect(error?.errno == .operationNotPermitted)
        #expect(
            error?.description
                == "cannot start /bin/sh as uid \(credentials.uid) (gid \(credentials.gid)): "
                + "Operation not permitted (EPERM)")
        #expect(!FileSystem.fileExists(marker))
    }
}

/// Makes `directory` open to everyone (0755) and writes a file `name` in it that only its owner,
/// root, may use (`mode`). Returns the file's path.
private func rootOnlyFile(in directory: TemporaryDirectory, _ name: String, _ text: String, mode: UInt32) throws -> String {
    try FileSystem.setPermissions(directory.path, 0o755)
    let path = directory.path + "/" + name
    try writeFile(path, text)
    try FileSystem.setPermissions(path, mode)
    return path
}

/// The fields of a /proc/PID/status text, each split at white space ("Uid" → 4 ids).
private func parseStatus(_ text: String) -> [String: [String]] {
    var fields: [String: [String]] = [:]
    for line in text.split(separator: "\n") {
        guard let colon = line.firstIndex(of: ":") else {
            continue
        }
        fields[String(line[..<colon])] = line[line.index(after: colon)...]
            .split(whereSeparator: { $0 == " " || $0 == "\t" }).map(String.init)
    }
    return fields
}

import Foundation
import Glibc
import Testing

/// Throwaway users and a group for the access tests, made with useradd and removed again. Names are
/// random (`tds` + 5 letters + a role letter), so parallel runs and leftovers never collide.
final class TestUsers {
    let group: String
    /// In `group` and in `allow_users`.
    let alice: String
    let bob: String
    /// In `group` (so it can connect) but not allowed to add jobs.
    let carol: String
    private var made: [String] = []

    init() throws {
        let stem = "tds" + String((0..<5).map { _ in "abcdefghijklmnopqrstuvwxyz".randomElement()! })
        group = stem + "g"
        alice = stem + "a"
        bob = stem + "b"
        carol = stem + "c"
        try Self.must("/usr/sbin/groupadd", [group])
        for user in [alice, bob, carol] {
            try Self.must("/usr/sbin/useradd", ["-M", "-N", "-g", "nogroup", "-G", group, "-d", "/nonexistent", "-s", "/usr/sbin/nologin", user])
            made.append(user)
        }
    }

    deinit {
        for user in made { _ = try? Daemon.run("/usr/sbin/userdel", [user]) }
        _ = try? Daemon.run("/usr/sbin/groupdel", [group])
    }

    func uid(_ user: String) -> UInt32 { getpwnam(user)!.pointee.pw_uid }

    /// Removes a user now (to test a job whose user went away).
    func delete(_ user: String) throws {
        try Self.must("/usr/sbin/userdel", [user])
        made.removeAll { $0 == user }
    }

    /// Runs `program` as `user` (its primary group and supplementary groups, like a login) via setpriv.
    func run(as user: String, _ program: String, _ arguments: [String]) throws -> CommandResult {
        try Daemon.run("/usr/bin/setpriv", ["--reuid=\(user)", "--regid=nogroup", "--init-groups", "--", program] + arguments)
    }

    private static func must(_ program: String, _ arguments: [String]) throws {
        let result = try Daemon.run(program, arguments)
        guard result.status == 0 else { throw HarnessError("\(program) \(arguments): \(result.stderr)") }
    }
}

/// Who may do what over the socket, and run-as-user, through the real daemon and timerctl run as
/// throwaway users (`docs/security.md`). Needs root (useradd, and a daemon that can switch users).
@Suite(.enabled(if: getuid() == 0, "needs root: creates users with useradd and runs timerd as root"), .serialized)
struct SecurityTests {
    let users: TestUsers
    let daemon: Daemon

    init() throws {
        users = try TestUsers()
        daemon = try Daemon(config: """
            [daemon]
            socket_group = \(users.group)
            allow_users = \(users.alice), \(users.bob)
            user_max_jobs = 3
            user_max_runs_per_minute = 4
            """)
        // mkdtemp made the directory 0700: let the users reach the socket in it.
        chmod(daemon.directory, 0o755)
    }

    /// timerctl as `user`.
    func ctl(_ user: String, _ arguments: String...) throws -> CommandResult {
        try ctl(user, arguments)
    }

    func ctl(_ user: String, _ arguments: [String]) throws -> CommandResult {
        try users.run(as: user, Daemon.binary("timerctl"), ["--socket", daemon.socket] + arguments)
    }

    func lastOutput(_ name: String) throws -> String? {
        try daemon.show(name)["last_output"] as? String
    }

    @Test func theSocketIsGroupReadableOnlyByTheConfiguredGroup() throws {
        var info = stat()
        #expect(stat(daemon.socket, &info) == 0)
        #expect(info.st_mode & 0o777 == 0o660)
        #expect(info.st_gid == getgrnam(users.group)!.pointee.gr_gid)
        #expect(daemon.logShows("mode 0660, group \(users.group)"))
    }

    @Test func aUsersJobRunsAsThatUserWithItsGroupsHomeAndPath() throws {
        let added = try ctl(users.alice, "add", "whoami", "--every", "1h", "--start", "0s", "--command",
                            "id -u; id -g; id -G; echo \"$HOME $USER $LOGNAME $PATH\"")
        #expect(added.status == 0, "\(added.stderr)")
        #expect(try eventually("the run's output") { try lastOutput("whoami")?.isEmpty == false })
        let lines = try #require(try lastOutput("whoami")).split(separator: "\n").map(String.init)
        let alice = getpwnam(users.alice)!.pointee
        let group = getgrnam(users.group)!.pointee.gr_gid
        #expect(lines.count == 4)
        #expect(lines.first == String(users.uid(users.alice)))
        #expect(lines.dropFirst().first == String(alice.pw_gid))
        #expect(Set((lines.dropFirst(2).first ?? "").split(separator: " ").map(String.init)) == [String(alice.pw_gid), String(group)])
        #expect(lines.last == "/nonexistent \(users.alice) \(users.alice) /usr/local/bin:/usr/bin:/bin")
        #expect(try daemon.show("whoami")["owner_uid"] as? Int == Int(users.uid(users.alice)))
    }

    @Test func anotherUserSeesNamesAndSchedulesButNotDetailsAndCannotChangeIt() throws {
        #expect(try ctl(users.alice, "add", "secret", "--every", "1h", "--command", "echo s3cr3t-token",
                        "--env", "TOKEN=hunter2", "--meta", "team=ops", "--tag", "t").status == 0)
        #expect(try ctl(users.alice, "run", "secret").status == 0)
        #expect(try eventually("the run's output") { try lastOutput("secret")?.contains("s3cr3t") == true })

        let shown = try ctl(users.bob, "show", "secret", "--json")
        #expect(shown.status == 0)
        #expect(shown.stdout.contains("\"schedule\":\"every 1h\""))
        #expect(shown.stdout.contains("\"redacted\":true"))
        for secret in ["s3cr3t", "hunter2", "team=ops", "echo"] { #expect(!shown.stdout.contains(secret), "\(secret)") }
        let listed = try ctl(users.bob, "list", "--json")
        #expect(listed.stdout.contains("\"secret\"") && !listed.stdout.contains("s3cr3t") && !listed.stdout.contains("hunter2"))
        let history = try ctl(users.bob, "history", "secret", "--json")
        #expect(history.status == 0 && !history.stdout.contains("s3cr3t"))

        for verb in [["cancel", "secret"], ["pause", "secret"], ["run", "secret"], ["resume", "secret", "--now"]] {
            let result = try ctl(users.bob, verb)
            #expect(result.status == 1, "\(verb)")
            #expect(result.stderr.contains("permission-denied") && result.stderr.contains("belongs to uid \(users.uid(users.alice))"), "\(verb): \(result.stderr)")
        }
        // A tag reaches only the caller's own jobs.
        let byTag = try ctl(users.bob, "cancel", "--tag", "t")
        #expect(byTag.status == 0)
        #expect(try daemon.show("secret")["state"] as? String == "scheduled")
        #expect(daemon.logShows("refused to change secret, which belongs to uid \(users.uid(users.alice))"))

        // The owner and root see everything, and may change it.
        #expect(try ctl(users.alice, "show", "secret", "--json").stdout.contains("hunter2"))
        #expect(try daemon.ctl("show", "secret", "--json").stdout.contains("hunter2"))
        #expect(try ctl(users.alice, "cancel", "secret").status == 0)
    }

    @Test func usersCannotRunAsSomeoneElseAndRootOnlyVerbsAreRefused() throws {
        for (arguments, message) in [
            (["--user", "root"], "only root may run jobs as another user"),
            (["--user", users.bob], "only root may run jobs as another user"),
            (["--group", "root"], "is not a member of it"),
        ] {
            let result = try ctl(users.alice, ["add", "escalate", "--every", "1h", "--command", "id"] + arguments)
            #expect(result.status == 1 && result.stderr.contains("permission-denied") && result.stderr.contains(message), "\(arguments): \(result.stderr)")
        }
        #expect(try ctl(users.alice, "add", "mine", "--every", "1h", "--command", "true", "--user", users.alice, "--group", users.group).status == 0)
        #expect(try ctl(users.alice, "reload").stderr.contains("permission-denied"))
        #expect(try ctl(users.alice, "mode", "maintenance").stderr.contains("permission-denied"))
        #expect(try ctl(users.alice, "mode").status == 0)
        #expect(try ctl(users.alice, "list").status == 0)
    }

    @Test func theAllowListRefusesOtherUsers() throws {
        let refused = try ctl(users.carol, "add", "nope", "--every", "1h", "--command", "true")
        #expect(refused.status == 1)
        #expect(refused.stderr.contains("permission-denied") && refused.stderr.contains("not in allow_users or allow_groups"))
        #expect(try ctl(users.carol, "list").status == 0)  // reading is not adding
        #expect(daemon.logShows("refused to add nope"))
        // allow_groups admits members: carol is in the group.
        try daemon.writeConfig("""
            [daemon]
            socket_group = \(users.group)
            allow_users = \(users.alice)
            allow_groups = \(users.group)
            """)
        #expect(try daemon.ctl("reload").status == 0)
        #expect(try ctl(users.carol, "add", "yes", "--every", "1h", "--command", "true").status == 0)
    }

    @Test func perUserJobAndRunLimitsHaveTheirOwnErrors() throws {
        for index in 1...3 {
            #expect(try ctl(users.alice, "add", "j\(index)", "--every", "1h", "--command", "true", "--overlap", "allow").status == 0)
        }
        let fourth = try ctl(users.alice, "add", "j4", "--every", "1h", "--command", "true")
        #expect(fourth.status == 1 && fourth.stderr.contains("too-many-jobs") && fourth.stderr.contains("user_max_jobs"))
        #expect(try ctl(users.bob, "add", "b1", "--every", "1h", "--command", "true").status == 0)  // per user
        #expect(try daemon.ctl("add", "r1", "--every", "1h", "--command", "true").status == 0)       // root: no limit

        var limited: CommandResult?
        for _ in 0..<6 {
            let result = try ctl(users.alice, "run", "j1")
            if result.status != 0 { limited = result; break }
        }
        let refusal = try #require(limited, "user_max_runs_per_minute=4 never refused a RUN")
        #expect(refusal.stderr.contains("rate-limited") && refusal.stderr.contains("user_max_runs_per_minute"), "\(refusal.stderr)")
        #expect(try daemon.ctl("run", "r1").status == 0)
    }

    @Test func usersMayOnlyTightenWhatTheirRunsGetAndTheirCeilingsHold() throws {
        try daemon.writeConfig("""
            [daemon]
            socket_group = \(users.group)
            allow_users = \(users.alice), \(users.bob)
            user_limit_nofile = 512
            """)
        #expect(try daemon.ctl("reload").status == 0)
        // (The weights, which need a cgroup controller, are checked in ControlHandlerTests.)
        for (arguments, message) in [
            (["--nice", "-1"], "nice=-1: only root may raise a run's priority"),
            (["--ionice", "realtime:0"], "only root may give a run real-time I/O"),
            (["--oom-score-adj", "-100"], "less likely to be killed than timerd"),
            (["--limit-nproc", "99999999999"], "limit_nproc=99999999999: only root may raise a limit above timerd's own"),
            (["--limit-nofile", "1024"], "limit_nofile=1024 is above user_limit_nofile=512"),
        ] {
            let result = try ctl(users.alice, ["add", "loose", "--in", "1h", "--command", "true"] + arguments)
            #expect(result.status == 1 && result.stderr.contains("permission-denied") && result.stderr.contains(message),
                    "\(arguments): \(result.stderr)")
        }
        // Tightening is anyone's: a later nice, idle I/O, a smaller limit.
        #expect(try ctl(users.alice, "add", "tight", "--in", "10ms", "--nice", "10", "--ionice", "idle", "--oom-score-adj", "500",
                        "--limit-nofile", "64", "--command", "ulimit -Hn").status == 0)
        // A job that sets nothing gets the ceiling; root's jobs have none.
        #expect(try ctl(users.alice, "add", "plain", "--in", "10ms", "--command", "ulimit -Hn").status == 0)
        #expect(try daemon.ctl("add", "roots", "--in", "10ms", "--limit-nofile", "1024", "--command", "ulimit -Hn").status == 0)
        try eventually("all three ran") { try ["tight", "plain", "roots"].allSatisfy { try lastOutput($0)?.isEmpty == false } }
        #expect(try lastOutput("tight") == "64\n")
        #expect(try lastOutput("plain") == "512\n")
        #expect(try lastOutput("roots") == "1024\n")
    }

    @Test func rootMayRunAJobAsAUserAndAMissingUserFailsTheRunInsteadOfRunningAsRoot() throws {
        let marker = daemon.directory + "/ran-as"
        #expect(try daemon.ctl("add", "asbob", "--every", "1h", "--user", users.bob, "--command", "id -u").status == 0)
        #expect(try daemon.ctl("run", "asbob").status == 0)
        #expect(try eventually("bob's run") { try lastOutput("asbob") == "\(users.uid(users.bob))\n" })

        #expect(try daemon.ctl("add", "gone", "--every", "1h", "--user", users.carol, "--command", "id -u > \(marker)").status == 0)
        try users.delete(users.carol)
        #expect(try daemon.ctl("run", "gone").status == 0)
        #expect(try eventually("the failed run") { try daemon.show("gone")["last_result"] as? String == "failed" })
        let reason = try #require(try daemon.show("gone")["last_reason"] as? String)
        #expect(reason.contains(users.carol) && reason.contains("no such user"), "\(reason)")
        #expect(!FileManager.default.fileExists(atPath: marker))
        // An unknown user is refused when the job is added, with the key in the message.
        #expect(try daemon.request("ADD ghost every=1h user=\(users.carol) command=true").hasPrefix("ERR bad-argument user: no such user"))
    }

    @Test func jobsKeepTheirOwnerAcrossARestart() throws {
        #expect(try ctl(users.alice, "add", "kept", "--every", "1h", "--command", "true").status == 0)
        _ = daemon.stop()
        let restarted = try Daemon(config: "[daemon]\nsocket_group = \(users.group)\n", stateDirectory: daemon.stateDirectory)
        chmod(restarted.directory, 0o755)
        #expect(try restarted.show("kept")["owner_uid"] as? Int == Int(users.uid(users.alice)))
        let denied = try users.run(as: users.bob, Daemon.binary("timerctl"), ["--socket", restarted.socket, "cancel", "kept"])
        #expect(denied.stderr.contains("permission-denied"))
    }
}

import Foundation
import Testing
@testable import TimerdCLI
import TimerdConfig
import TimerdCore
import TimerdSystem
import TimerdTestSupport

/// `timerctl import systemd`: Debian's timer units as Debian ships them and edge cases, each output loaded
/// by timerd's ConfigLoader, and the imported calendars checked against `systemd-analyze calendar`.
@Suite("timerctl import systemd")
struct ImportSystemdTests {
    static let homes = ["root": "/root", "man": "/var/cache/man", "alice": "/home/alice"]

    /// Units in /units, these users.
    static func fileSystem(_ files: [String: String]) -> InMemoryConfigFileSystem {
        var fileSystem = InMemoryConfigFileSystem(Dictionary(uniqueKeysWithValues: files.map { ("/units/" + $0.key, $0.value) }))
        fileSystem.users = Set(homes.keys)
        return fileSystem
    }

    /// Imports `timers` from `files`; the output must load as it is.
    func convert(_ files: [String: String], _ timers: [String]) throws -> (result: SystemdImport.Result, config: Configuration) {
        let fileSystem = Self.fileSystem(files)
        let importer = SystemdImport(fileSystem: fileSystem, unitPath: ["/units"]) { Self.homes[$0] }
        let result = importer.convert(timers)
        let config = try ConfigLoader.parse(result.config, path: "/etc/timerd/jobs.d/systemd.conf", fileSystem: fileSystem)
        #expect(importer.convert(timers) == result, "stable")
        return (result, config)
    }

    func job(_ config: Configuration, _ name: String) throws -> JobSpec {
        try #require(config.job(named: JobName(name))).spec
    }

    // MARK: Debian's units (bookworm)

    static let logrotateTimer = """
        [Unit]
        Description=Daily rotation of log files
        Documentation=man:logrotate(8) man:logrotate.conf(5)

        [Timer]
        OnCalendar=daily
        AccuracySec=1h
        Persistent=true

        [Install]
        WantedBy=timers.target

        """
    static let logrotateService = """
        [Unit]
        Description=Rotate log files
        Documentation=man:logrotate(8) man:logrotate.conf(5)
        RequiresMountsFor=/var/log
        ConditionACPower=true

        [Service]
        Type=oneshot
        ExecStart=/usr/sbin/logrotate /etc/logrotate.conf

        # performance options
        Nice=19
        IOSchedulingClass=best-effort
        IOSchedulingPriority=7

        # hardening options
        #  details: https://www.freedesktop.org/software/systemd/man/systemd.exec.html
        #  no ProtectHome for userdir logs
        #  no PrivateNetwork for mail deliviery
        #  no NoNewPrivileges for third party rotate scripts
        #  no RestrictSUIDSGID for creating setgid directories
        LockPersonality=true
        MemoryDenyWriteExecute=true
        PrivateDevices=true
        PrivateTmp=true
        ProtectClock=true
        ProtectControlGroups=true
        ProtectHostname=true
        ProtectKernelLogs=true
        ProtectKernelModules=true
        ProtectKernelTunables=true
        ProtectSystem=full
        RestrictNamespaces=true
        RestrictRealtime=true

        """
    static let aptDailyTimer = """
        [Unit]
        Description=Daily apt download activities

        [Timer]
        OnCalendar=*-*-* 6,18:00
        RandomizedDelaySec=12h
        Persistent=true

        [Install]
        WantedBy=timers.target

        """
    static let aptDailyService = """
        [Unit]
        Description=Daily apt download activities
        Documentation=man:apt(8)
        ConditionACPower=true
        After=network.target network-online.target systemd-networkd.service NetworkManager.service connman.service

        [Service]
        Type=oneshot
        ExecStartPre=-/usr/lib/apt/apt-helper wait-online
        ExecStart=/usr/lib/apt/apt.systemd.daily update

        """
    static let fstrimTimer = """
        [Unit]
        Description=Discard unused blocks once a week
        Documentation=man:fstrim
        ConditionVirtualization=!container
        ConditionPathExists=!/etc/initrd-release

        [Timer]
        OnCalendar=weekly
        AccuracySec=1h
        Persistent=true
        RandomizedDelaySec=6000

        [Install]
        WantedBy=timers.target

        """
    static let fstrimService = """
        [Unit]
        Description=Discard unused blocks on filesystems from /etc/fstab
        Documentation=man:fstrim(8)
        ConditionVirtualization=!container

        [Service]
        Type=oneshot
        ExecStart=/sbin/fstrim --listed-in /etc/fstab:/proc/self/mountinfo --verbose --quiet-unsupported
        PrivateDevices=no
        PrivateNetwork=yes
        PrivateUsers=no
        ProtectKernelTunables=yes
        ProtectKernelModules=yes
        ProtectControlGroups=yes
        MemoryDenyWriteExecute=yes
        SystemCallFilter=@default @file-system @basic-io @system-service

        """
    static let manDBTimer = """
        [Unit]
        Description=Daily man-db regeneration
        Documentation=man:mandb(8)

        [Timer]
        OnCalendar=daily
        RandomizedDelaySec=12h
        Persistent=true

        [Install]
        WantedBy=timers.target

        """
    static let manDBService = """
        [Unit]
        Description=Daily man-db regeneration
        Documentation=man:mandb(8)
        ConditionACPower=true

        [Service]
        Type=oneshot
        # Recover from deletion, per FHS.
        ExecStart=+/usr/bin/install -d -o man -g man -m 0755 /var/cache/man
        # Expunge old catman pages which have not been read in a week.
        ExecStart=/usr/bin/find /var/cache/man -type f -name *.gz -atime +6 -delete
        # Regenerate man database.
        ExecStart=/usr/bin/mandb --quiet
        User=man
        Nice=19
        IOSchedulingClass=idle
        IOSchedulingPriority=7
        ProtectSystem=full
        ProtectHome=true
        PrivateTmp=true
        PrivateDevices=true
        ProtectHostname=true
        ProtectClock=true
        ProtectKernelTunables=true
        ProtectKernelModules=true
        ProtectKernelLogs=true
        ProtectControlGroups=true
        LockPersonality=true
        RestrictRealtime=true

        """
    static let debian = [
        "logrotate.timer": logrotateTimer, "logrotate.service": logrotateService, "apt-daily.timer": aptDailyTimer,
        "apt-daily.service": aptDailyService, "fstrim.timer": fstrimTimer, "fstrim.service": fstrimService,
        "man-db.timer": manDBTimer, "man-db.service": manDBService,
    ]

    @Test func logrotate() throws {
        let (result, config) = try convert(Self.debian, ["logrotate.timer"])
        let job = try job(config, "logrotate")
        #expect(job.schedule.key == "calendar")
        #expect(job.action == .argv(["/usr/sbin/logrotate", "/etc/logrotate.conf"]))
        #expect(result.config.contains("""
            [job "logrotate"]
            calendar = daily
            argv = /usr/sbin/logrotate /etc/logrotate.conf
            leeway = 1h
            misfire = once
            nice = 19
            ionice = best-effort:7

            """))
        #expect(result.config.contains("# Daily rotation of log files\n"))
        // RequiresMountsFor, ConditionACPower and the 13 hardening settings.
        #expect(result.leftOut == 15)
        #expect(result.diagnostics.first == "/units/logrotate.service:4: timerd has no unit dependencies or conditions")
        #expect(result.diagnostics.last == "/units/logrotate.service:34: timerd does not sandbox runs")
        #expect(result.config.contains("# timerctl import: left out /units/logrotate.service:32: timerd does not sandbox runs:\n#\tProtectSystem=full\n"))
        #expect(!result.config.contains("AccuracySec=1min"), "AccuracySec is set")
    }

    @Test func aptDaily() throws {
        let (result, config) = try convert(Self.debian, ["apt-daily"])
        let job = try job(config, "apt-daily")
        // ExecStartPre's failure is ignored ("-"), then ExecStart.
        #expect(job.action == .shell("{ /usr/lib/apt/apt-helper wait-online || :; } && /usr/lib/apt/apt.systemd.daily update"))
        #expect(result.config.contains("calendar = *-*-* 6,18:00\n"))
        #expect(result.config.contains("jitter = 12h\nmisfire = once\n"))
        #expect(result.config.contains("# systemd's default AccuracySec=1min"))
        #expect(result.diagnostics == [
            "/units/apt-daily.service:4: timerd has no unit dependencies or conditions",
            "/units/apt-daily.service:5: timerd has no unit dependencies or conditions",
        ])
    }

    @Test func fstrim() throws {
        let (result, config) = try convert(Self.debian, ["fstrim.timer"])
        let job = try job(config, "fstrim")
        #expect(job.action == .argv(["/sbin/fstrim", "--listed-in", "/etc/fstab:/proc/self/mountinfo", "--verbose", "--quiet-unsupported"]))
        #expect(result.config.contains("calendar = weekly\n"))
        #expect(result.config.contains("leeway = 1h\nmisfire = once\njitter = 6000\n"))
        // PrivateDevices=no and PrivateUsers=no are systemd's defaults: nothing is left out for them.
        #expect(!result.config.contains("#\tPrivateDevices=no"))
        #expect(result.leftOut == 9)
    }

    @Test func manDB() throws {
        let (result, config) = try convert(Self.debian, ["man-db.timer"])
        let job = try job(config, "man-db")
        #expect(job.action == .shell("/usr/bin/find /var/cache/man -type f -name '*.gz' -atime +6 -delete && /usr/bin/mandb --quiet"))
        #expect(job.user == "man")
        #expect(result.config.contains("user = man\nnice = 19\nionice = idle\n"))
        #expect(result.diagnostics.contains(
            "/units/man-db.service:9: + runs this command with full privileges, the rest as User=; a timerd job has one user"))
    }

    @Test func allFourAtOnce() throws {
        let (result, config) = try convert(Self.debian, ["logrotate", "apt-daily", "fstrim", "man-db"])
        #expect(config.jobs.map(\.spec.name.rawValue) == ["logrotate", "apt-daily", "fstrim", "man-db"])
        #expect(result.errors == [])
    }

    // MARK: Edge cases

    static func simple(_ timer: String, _ service: String) -> [String: String] {
        ["t.timer": "[Timer]\n" + timer + "\n", "t.service": "[Service]\n" + service + "\n"]
    }

    @Test func specifiersAndQuoting() throws {
        let (result, config) = try convert(Self.simple("OnCalendar=hourly", """
            ExecStart=/bin/echo "%n %N %p %u %h" '100%%' "a\\tb" \\
              'it''s' "${HOME}/x" $$HOME
            """), ["t"])
        let job = try job(config, "t")
        #expect(job.action == .shell("/bin/echo 't.service t t root /root' 100% 'a\tb' its \"${HOME}\"/x '$HOME'"))
        #expect(result.diagnostics == [])
        let (bad, _) = try convert(Self.simple("OnCalendar=hourly", "ExecStart=/bin/echo %H $HOME\nExecStart=@/bin/x y"), ["t"])
        #expect(bad.diagnostics == [
            "/units/t.service:3: only Type=oneshot may have several ExecStart=",
        ])
        let (specifier, _) = try convert(Self.simple("OnCalendar=hourly", "ExecStart=/bin/echo %H"), ["t"])
        #expect(specifier.diagnostics.first?.hasSuffix("the specifier %H is not supported (it depends on the machine or the running system)") == true)
        let (word, _) = try convert(Self.simple("OnCalendar=hourly", "ExecStart=/bin/echo $HOME"), ["t"])
        #expect(word.diagnostics.first?.contains("write ${NAME}") == true)
        let (find, findConfig) = try convert(Self.simple("OnCalendar=hourly", "ExecStart=/usr/bin/find /tmp -exec rm {} \\;"), ["t"])
        #expect(try self.job(findConfig, "t").action == .argv(["/usr/bin/find", "/tmp", "-exec", "rm", "{}", ";"]))
        #expect(find.diagnostics == [])
        let (two, _) = try convert(Self.simple("OnCalendar=hourly", "ExecStart=/bin/a ; /bin/b"), ["t"])
        #expect(two.diagnostics == ["/units/t.service:2: several commands on one line (;) are not supported"])
        let (argv0, _) = try convert(Self.simple("OnCalendar=hourly", "ExecStart=@/bin/x y"), ["t"])
        #expect(argv0.diagnostics.first?.hasSuffix("@ sets the program's argv[0], which timerd cannot") == true)
    }

    @Test func environmentWithQuotesAndFiles() throws {
        var files = Self.simple("OnCalendar=daily", """
            Type=oneshot
            Environment="GREETING=hello world" PLAIN=a\\sb 'Q=it"s'
            Environment=PLAIN=c
            EnvironmentFile=/units/env
            EnvironmentFile=-/units/missing
            WorkingDirectory=~
            User=alice
            TimeoutStartSec=5min
            MemoryMax=1G
            TasksMax=64
            LimitNOFILE=4096
            CPUQuota=50%
            ExecStart=+/bin/sh -c 'echo "$GREETING" > /tmp/x'
            ExecStart=/usr/bin/env
            """)
        files["env"] = "# comment\nFROM_FILE='x y'\nPLAIN=d\n"
        let (result, config) = try convert(files, ["t.timer"])
        let job = try job(config, "t")
        #expect(job.env == [KeyValue("GREETING", "hello world"), KeyValue("PLAIN", "d"), KeyValue("Q", "it\"s"), KeyValue("FROM_FILE", "x y")])
        #expect(job.cwd == "/home/alice")
        #expect(job.action == .shell("/usr/bin/env"))
        #expect(job.user == "alice")
        #expect(result.config.contains("timeout = 5min\nkill_grace = 90s\n"))
        #expect(result.config.contains("memory_max = 1G\ntasks_max = 64\nlimit_nofile = 4096\ncpu_quota = 50%\n"))
        // + with User=: the command would run as root.
        #expect(result.leftOut == 1)
        let (root, rootConfig) = try convert(Self.simple("OnCalendar=daily", "ExecStart=+/bin/sh -c 'echo \"$GREETING\" > /tmp/x'"), ["t"])
        #expect(try self.job(rootConfig, "t").action == .argv(["/bin/sh", "-c", "echo \"$GREETING\" > /tmp/x"]))
        #expect(root.diagnostics == [])
    }

    @Test func severalOnCalendarMonotonicAndUnknownKeys() throws {
        let (result, config) = try convert(Self.simple("""
            OnCalendar=Mon..Fri 09:00
            OnCalendar=Sat 10:00 Europe/Berlin
            OnBootSec=15min
            OnUnitActiveSec=1h
            WakeSystem=true
            Frobnicate=yes
            """, "ExecStart=/bin/true\nRestart=on-failure"), ["t"])
        #expect(try job(config, "t").schedule.key == "calendar")
        #expect(result.config.contains("calendar = Mon..Fri 09:00\n"))
        #expect(result.diagnostics == [
            "/units/t.timer:3: a timerd job has one schedule; a second job for this one could run at the same time as the first, where systemd runs the service once",
            "/units/t.timer:4: timerd's 'in' counts from timerd's start or a reload that changes the job, not from boot or the timer's start",
            "/units/t.timer:5: this counts from the service's last start or stop; timerd's 'every' keeps a fixed grid from timerd's start",
            "/units/t.timer:6: timerd has no equivalent of WakeSystem=",
            "/units/t.timer:7: timerd has no equivalent of Frobnicate=",
            "/units/t.service:3: timerd has no equivalent of Restart=",
        ])
        let (monotonic, monotonicConfig) = try convert(Self.simple("OnBootSec=15min", "ExecStart=/bin/true"), ["t"])
        #expect(monotonicConfig.jobs.isEmpty)
        #expect(monotonic.leftOut == 2)
        let (bad, badConfig) = try convert(Self.simple("OnCalendar=daily\nAccuracySec=soon", "ExecStart=/bin/true\nNice=99"), ["t"])
        #expect(badConfig.jobs.count == 1)
        #expect(bad.leftOut == 2, "the loader's refusals: \(bad.diagnostics)")
        // The last assignment of a single-valued setting wins; a value a config line would change is left out;
        // argv holds a line break (as \n in double quotes).
        let (last, lastConfig) = try convert(Self.simple("OnCalendar=daily", """
            Type=oneshot
            Nice=1
            Nice=2
            Environment="PAD= x "
            TimeoutSec=10s
            ExecStart=/bin/true
            """), ["t"])
        #expect(try job(lastConfig, "t").resources.nice == 2)
        #expect(last.config.contains("timeout = 10s\nkill_grace = 10s\n"))
        #expect(last.diagnostics.count == 1 && last.diagnostics[0].hasPrefix("/units/t.service:5: PAD= x  cannot be a config value"))
        let (lineBreak, lineBreakConfig) = try convert(Self.simple("OnCalendar=daily", "ExecStart=/bin/echo \"a\\nb\""), ["t"])
        #expect(try job(lineBreakConfig, "t").action == .argv(["/bin/echo", "a\nb"]))
        #expect(lineBreak.diagnostics == [])
    }

    @Test func dropInsAndUnitAndPaths() throws {
        var files = Self.simple("OnCalendar=daily\nUnit=other.service", "ExecStart=/bin/false")
        files["other.service"] = "[Service]\nExecStart=/bin/old\n"
        files["other.service.d/10-new.conf"] = "[Service]\nExecStart=\nExecStart=/bin/new\nNice=5\n"
        files["t.timer.d/override.conf"] = "[Timer]\nPersistent=yes\n"
        let (result, config) = try convert(files, ["t"])
        let job = try job(config, "t")
        #expect(job.action == .argv(["/bin/new"]))
        #expect(result.config.contains("misfire = once\nnice = 5\n"))
        let missing = SystemdImport(fileSystem: Self.fileSystem([:]), unitPath: ["/units"]) { _ in nil }.convert(["nope", "/units/x.timer"])
        #expect(missing.errors.count == 2)
        #expect(missing.errors.first == "nope: no such timer unit in /units")
        #expect(missing.errors.last?.hasPrefix("/units/x.timer: cannot read: ") == true)
    }

    /// `backup@home.timer` is `backup@.timer` with the instance `home` (for %i), its drop-ins after the template's.
    @Test func templateInstances() throws {
        let files = [
            "backup@.timer": "[Timer]\nOnCalendar=daily\n", "backup@.service": "[Service]\nExecStart=/usr/local/bin/backup %i %n\n",
            "backup@.timer.d/a.conf": "[Timer]\nAccuracySec=1s\n", "backup@home.timer.d/b.conf": "[Timer]\nAccuracySec=2s\n",
        ]
        let (result, config) = try convert(files, ["backup@home"])
        let job = try job(config, "backup-home")
        #expect(job.action == .argv(["/usr/local/bin/backup", "home", "backup@home.service"]))
        #expect(result.config.contains("# (the job is named backup-home: a job name cannot be backup@home)\n"))
        #expect(result.config.contains("leeway = 2s\n") && !result.config.contains("leeway = 1s"))
    }

    // MARK: The schedules against systemd

    /// The imported calendars are systemd's own: `systemd-analyze calendar` gives the same normalised form
    /// and the same next three elapses from a fixed base as timerd's calendar engine.
    @Test func theImportedCalendarsFireWhenSystemdWould() throws {
        guard let analyze = ["/usr/bin/systemd-analyze", "/bin/systemd-analyze"].first(where: { FileManager.default.isExecutableFile(atPath: $0) }) else {
            Issue.record("systemd-analyze is not installed")
            return
        }
        let (_, config) = try convert(Self.debian, ["logrotate", "apt-daily", "fstrim", "man-db"])
        let base: Int64 = 1_798_000_000
        for job in config.jobs {
            guard case .calendar(let spec) = job.spec.schedule else { Issue.record("\(job.spec.name) has no calendar"); continue }
            let process = Process()
            process.executableURL = URL(fileURLWithPath: analyze)
            process.arguments = ["--no-pager", "calendar", "--iterations=3", "--base-time=@\(base)", "--", spec.text]
            process.environment = ["TZ": "UTC", "LC_ALL": "C", "SYSTEMD_COLORS": "0", "PATH": "/usr/bin:/bin"]
            let out = Pipe()
            process.standardOutput = out
            try process.run()
            let text = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            process.waitUntilExit()
            let lines = text.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }
            let normalized = lines.first { $0.hasPrefix("Normalized form: ") }?.dropFirst("Normalized form: ".count)
            #expect(normalized.map(String.init) == spec.normalized, "\(spec.text)")
            let theirs = lines.filter { $0.hasPrefix("Next elapse: ") || $0.hasPrefix("Iter. #") }.map { line in
                String(line[line.index(after: line.firstIndex(of: ":")!)...]).trimmingCharacters(in: .whitespaces)
            }
            var ours: [Int64] = []
            var after = base * 1_000_000
            for _ in 0..<3 {
                guard let next = spec.next(after: after, in: ZoneRules.utc) else { break }
                ours.append(next / 1_000_000)
                after = next
            }
            // `Thu 2026-12-24 00:00:00 UTC`
            let theirsSeconds = try theirs.map { value -> Int64 in
                let parts = value.split(separator: " ")
                try #require(parts.count == 4 && parts[3] == "UTC", "\(value)")
                return try RFC3339.parse("\(parts[1])T\(parts[2])Z").nanosecondsSinceEpoch / 1_000_000_000
            }
            #expect(theirsSeconds.count == 3)
            #expect(ours == theirsSeconds, "\(spec.text)")
        }
    }

    // MARK: The command

    @Test func theCommandLine() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        try FileSystem.writeAtomically(directory.path + "/a.timer", "[Timer]\nOnCalendar=hourly\nAccuracySec=1s\n")
        try FileSystem.writeAtomically(directory.path + "/a.service", "[Service]\nExecStart=/bin/ok\n")
        try FileSystem.writeAtomically(directory.path + "/b.timer", "[Timer]\nOnCalendar=hourly\nAccuracySec=1s\n")
        try FileSystem.writeAtomically(directory.path + "/b.service", "[Service]\nExecStart=/bin/ok\nRestart=always\n")
        let ok = Transcript()
        ok.status = Timerctl.run(arguments: ["import", "systemd", directory.path + "/a.timer"], context: offlineContext(ok, verb: "import"))
        #expect(ok.status == 0)
        #expect(ok.stdout.contains("[job \"a\"]\ncalendar = hourly\nargv = /bin/ok\nleeway = 1s\n"))
        let left = Transcript()
        left.status = Timerctl.run(arguments: ["import", "systemd", "--unit-path", directory.path, "a", "b"], context: offlineContext(left, verb: "import"))
        #expect(left.status == 1)
        #expect(left.stderr.hasPrefix("\(directory.path)/b.service:3: timerd has no equivalent of Restart=\n"))
        let forced = Transcript()
        forced.status = Timerctl.run(
            arguments: ["import", "systemd", "--force", "--unit-path", directory.path, "a", "b"], context: offlineContext(forced, verb: "import"))
        #expect(forced.status == 0)
        #expect(forced.stdout == left.stdout)
        let missing = Transcript()
        missing.status = Timerctl.run(
            arguments: ["import", "systemd", "--force", "--unit-path", directory.path, "c"], context: offlineContext(missing, verb: "import"))
        #expect(missing.status == 1)
        #expect(missing.stderr == "c: no such timer unit in \(directory.path)\n")
        #expect(throws: UsageError.self) { try CommandParser.parse(["import", "systemd"]) }
        #expect(throws: UsageError.self) { try CommandParser.parse(["import", "systemd", "--user", "x", "a.timer"]) }
        #expect(throws: UsageError.self) { try CommandParser.parse(["import", "crontab", "--unit-path", "/x"]) }
        #expect(try CommandParser.parse(["import", "systemd", "a", "b"]).action == .importSystemd(units: ["a", "b"], []))
    }
}

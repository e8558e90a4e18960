import Foundation
import Testing
@testable import TimerdCLI
import TimerdConfig
import TimerdCore
import TimerdSystem
import TimerdTestSupport

/// `timerctl import crontab`: real crontabs and edge cases, each output loaded by timerd's ConfigLoader (the
/// users and zones of an in-memory file system) and its schedules checked against croniter.
@Suite("timerctl import crontab")
struct ImportCrontabTests {
    static let homes = ["root": "/root", "alice": "/home/alice", "www-data": "/var/www"]

    /// The file system the output is checked with: these users, and the machine's zones.
    static let fileSystem: InMemoryConfigFileSystem = {
        var zones: [String: [UInt8]] = [:]
        for zone in ["Europe/Berlin", "America/New_York", "UTC"] {
            let path = "/usr/share/zoneinfo/" + zone
            zones[path] = (try? [UInt8](Data(contentsOf: URL(fileURLWithPath: path)))) ?? []
        }
        var fileSystem = InMemoryConfigFileSystem(bytes: zones)
        fileSystem.users = Set(homes.keys)
        return fileSystem
    }()

    static var importer: CrontabImport { CrontabImport(fileSystem: fileSystem) { homes[$0] } }

    /// Imports `text`; the output must load as it is.
    func convert(_ text: String, system: Bool = false, user: String? = nil, path: String = "/etc/crontab") throws
        -> (result: CrontabImport.Result, config: Configuration)
    {
        let result = Self.importer.convert(text, from: CrontabImport.Source(path: path, system: system, user: user))
        let config = try ConfigLoader.parse(result.config, path: "/etc/timerd/jobs.d/cron.conf", fileSystem: Self.fileSystem)
        return (result, config)
    }

    func job(_ config: Configuration, _ name: String) throws -> JobSpec {
        try #require(config.job(named: JobName(name))).spec
    }

    static let debian = """
        # /etc/crontab: system-wide crontab
        # Unlike any other crontab you don't have to run the `crontab'
        # command to install the new version when you edit this file
        # and files in /etc/cron.d. These files also have username fields,
        # that none of the other crontabs do.

        SHELL=/bin/sh
        # You can also override PATH, but by default, newer versions inherit it from the environment
        PATH=/usr/local/sbin:/usr/local/bin:/sbin:/bin:/usr/sbin:/usr/bin

        # Example of job definition:
        # .---------------- minute (0 - 59)
        # |  .------------- hour (0 - 23)
        # |  |  .---------- day of month (1 - 31)
        # |  |  |  .------- month (1 - 12) OR jan,feb,mar,apr ...
        # |  |  |  |  .---- day of week (0 - 6) (Sunday=0 or 7) OR sun,mon,tue,wed,thu,fri,sat
        # |  |  |  |  |
        # *  *  *  *  * user-name command to be executed
        17 *\t* * *\troot\tcd / && run-parts --report /etc/cron.hourly
        25 6\t* * *\troot\ttest -x /usr/sbin/anacron || { cd / && run-parts --report /etc/cron.daily; }
        47 6\t* * 7\troot\ttest -x /usr/sbin/anacron || { cd / && run-parts --report /etc/cron.weekly; }
        52 6\t1 * *\troot\ttest -x /usr/sbin/anacron || { cd / && run-parts --report /etc/cron.monthly; }
        #

        """

    @Test func debiansEtcCrontab() throws {
        let (result, config) = try convert(Self.debian, system: true)
        #expect(result.diagnostics == [])
        #expect(config.jobs.map(\.spec.name.rawValue) == ["cron.hourly", "cron.daily", "cron.weekly", "cron.monthly"])
        let daily = try job(config, "cron.daily")
        #expect(daily.action == .shell("test -x /usr/sbin/anacron || { cd / && run-parts --report /etc/cron.daily; }"))
        #expect(daily.user == "root")
        #expect(daily.cwd == "/root")
        #expect(daily.env == [KeyValue("SHELL", "/bin/sh"), KeyValue("PATH", "/usr/local/sbin:/usr/local/bin:/sbin:/bin:/usr/sbin:/usr/bin")])
        #expect(result.config.contains("# *  *  *  *  * user-name command to be executed\n[job \"cron.hourly\"]\ncron = 17 * * * *\n"))
        #expect(result.config.hasSuffix("\n#\n"))
        #expect(Self.importer.convert(Self.debian, from: .init(path: "/etc/crontab", system: true)) == result, "stable")
    }

    @Test func cronDFilesE2scrubAndPHP() throws {
        let e2scrub = """
            30 3 * * 0 root test -e /run/systemd/system || SERVICE_MODE=1 /usr/lib/x86_64-linux-gnu/e2fsprogs/e2scrub_all_cron
            10 3 * * * root test -e /run/systemd/system || SERVICE_MODE=1 /sbin/e2scrub_all -A -r

            """
        let (result, config) = try convert(e2scrub, system: true, path: "/etc/cron.d/e2scrub_all")
        #expect(result.diagnostics == [])
        #expect(config.jobs.map(\.spec.name.rawValue) == ["e2scrub_all_cron", "e2scrub_all"])
        #expect(try job(config, "e2scrub_all_cron").env == [KeyValue("PATH", "/usr/bin:/bin")])
        let php = """
            # /etc/cron.d/php@PHP_VERSION@: crontab fragment for PHP
            #  This purges session files in session.save_path older than X,
            #  where X is defined in seconds as the largest value of
            #  session.gc_maxlifetime from all your SAPI php.ini files
            #  or 24 minutes if not defined.  The script triggers only
            #  when session.save_handler=files.
            #
            #  WARNING: The scripts tries hard to honour all relevant
            #  session PHP options, but if you do something unusual
            #  you have to disable this script and take care of your
            #  sessions yourself.

            # Look for and purge old sessions every 30 minutes
            09,39 *     * * *     root   [ -x /usr/lib/php/sessionclean ] && if [ ! -d /run/systemd/system ]; then /usr/lib/php/sessionclean; fi

            """
        let (phpResult, phpConfig) = try convert(php, system: true, path: "/etc/cron.d/php")
        #expect(phpResult.diagnostics == [])
        let clean = try job(phpConfig, "sessionclean")
        #expect(clean.action == .shell("[ -x /usr/lib/php/sessionclean ] && if [ ! -d /run/systemd/system ]; then /usr/lib/php/sessionclean; fi"))
        #expect(phpResult.config.contains("# Look for and purge old sessions every 30 minutes\n[job \"sessionclean\"]\ncron = 09,39 * * * *\n"))
    }

    /// Runs `command` as timerd would (`/bin/sh -c`), with no standard input; returns its stdout.
    func shellOutput(_ command: String) throws -> String {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/sh")
        process.arguments = ["-c", command]
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardInput = FileHandle.nullDevice
        try process.run()
        let data = pipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return String(decoding: data, as: UTF8.self)
    }

    @Test func percentIsStandardInputAndBackslashPercentIsAPercent() throws {
        let text = #"""
            0 * * * * cat; echo "50\% it's done"%line 1%'quoted' \%x\y%%
            5 * * * * date +\%Y-\%m-\%d

            """#
        let (result, config) = try convert(text, user: "alice")
        #expect(result.diagnostics == [])
        let cat = try job(config, "cat")
        guard case .shell(let command) = cat.action else { Issue.record("not a command"); return }
        #expect(command == #"printf 'line 1\n'\''quoted'\'' %%x\\y\n\n' | /bin/sh -c 'cat; echo "50% it'\''s done"'"#)
        #expect(try shellOutput(command) == "line 1\n'quoted' %x\\y\n\n50% it's done\n")
        #expect(try job(config, "date").action == .shell("date +%Y-%m-%d"))
    }

    @Test func environmentLinesTimeZonesMailAndShell() throws {
        let text = """
            MAILTO=ops@example.net
            CRON_TZ=Europe/Berlin
            LANG = "C.UTF-8"
            HOME=/srv/app
            0 2 * * * /srv/app/bin/backup --full
            TZ='America/New_York'
            PATH=/opt/bin:/usr/bin:/bin
            SHELL=/bin/bash
            0 3 * * * echo $BASH_VERSION %x

            """
        let (result, config) = try convert(text, user: "alice")
        #expect(result.diagnostics == [])
        #expect(result.config.contains("# MAILTO=ops@example.net: timerd sends no mail"))
        #expect(result.config.contains("on_failure"))
        #expect(result.config.contains("# SHELL=/bin/bash: timerd runs commands with /bin/sh"))
        let backup = try job(config, "backup")
        #expect(backup.timezone == "Europe/Berlin")
        #expect(backup.cwd == "/srv/app", "cron runs a job in its HOME")
        #expect(backup.user == "alice")
        #expect(backup.env == [KeyValue("PATH", "/usr/bin:/bin"), KeyValue("LANG", "C.UTF-8"), KeyValue("HOME", "/srv/app")])
        let echo = try job(config, "echo")
        #expect(echo.timezone == "America/New_York")
        #expect(echo.env == [
            KeyValue("LANG", "C.UTF-8"), KeyValue("HOME", "/srv/app"), KeyValue("TZ", "America/New_York"),
            KeyValue("PATH", "/opt/bin:/usr/bin:/bin"), KeyValue("SHELL", "/bin/bash"),
        ])
        #expect(echo.action == .shell(#"printf x | /bin/bash -c 'echo $BASH_VERSION '"#))
        let (bash, bashConfig) = try convert("SHELL=/bin/bash\n@hourly [[ -e /x ]] || echo no\n", user: "alice")
        #expect(bash.diagnostics == [])
        #expect(bashConfig.jobs.first?.spec.action == .argv(["/bin/bash", "-c", "[[ -e /x ]] || echo no"]))
    }

    @Test func rebootAndTheMacros() throws {
        let macros = ["@reboot", "@hourly", "@daily", "@midnight", "@weekly", "@monthly", "@yearly", "@annually"]
        let text = macros.map { "\($0) /usr/local/bin/task" }.joined(separator: "\n") + "\n@Daily /bin/true\n"
        let (result, config) = try convert(text, user: "alice")
        #expect(result.diagnostics == [])
        #expect(config.jobs.map(\.spec.name.rawValue) == ["task"] + (2...8).map { "task-\($0)" } + ["true"])
        var schedules: [String] = []
        for job in config.jobs {
            if case .cron(let expression) = job.spec.schedule { schedules.append(expression.text) }
        }
        #expect(schedules == macros + ["@daily"])
        #expect(try CronExpression.parse(schedules[0]).isReboot)
    }

    @Test func commentsBlankLinesAndDuplicateNames() throws {
        let text = """
            # nightly


            # first backup
            0 1 * * * /usr/bin/backup.sh a
            0 2 * * * /usr/bin/backup.sh b
            # third
            0 3 * * * BACKUP-SH c 2>&1 >/dev/null
            0 4 * * * FOO=1 "/usr/bin/Backup.sh" d

            """
        let (result, config) = try convert(text, user: "alice")
        #expect(result.diagnostics == [])
        #expect(config.jobs.map(\.spec.name.rawValue) == ["backup.sh", "backup.sh-2", "backup-sh", "backup.sh-3"])
        #expect(result.config.contains("\n# nightly\n\n# first backup\n[job \"backup.sh\"]\n"))
        #expect(result.config.contains("\n# third\n[job \"backup-sh\"]\n"))
    }

    @Test func whatCannotBeConvertedIsACommentSayingWhy() throws {
        let text = """
            61 * * * * /bin/minute
            @every 5m /bin/every
            0 0 * * * root /bin/no-user-field
            SPACES = "  padded  "
            0 1 * * * /bin/padded
            SPACES=ok
            0 2 * * * /bin/fine
            0 3 * * * echo trailing \\

            """
        let (result, config) = try convert(text, path: "/tmp/c")
        #expect(result.diagnostics == [
            #"/tmp/c:1: invalid cron expression "61 * * * *": minute field "61": 61 is out of range 0-59"#,
            #"/tmp/c:2: unknown macro "@every""#,
            #"/tmp/c:5: SPACES="  padded  " cannot be a config value as it is (it would lose blanks at either end or a trailing backslash)"#,
        ])
        #expect(result.config.contains("# timerctl import: left out line 2: unknown macro \"@every\":\n#\t@every 5m /bin/every\n"))
        // A user field in a per-user crontab is the command's first word, as cron reads it.
        #expect(config.jobs.map(\.spec.name.rawValue) == ["root", "fine", "echo"])
        #expect(try job(config, "echo").action == .argv(["/bin/sh", "-c", "echo trailing \\"]))
        let (system, _) = try convert("0 0 * * * nobody /bin/x\n0 0 * * *\n", system: true, path: "/etc/cron.d/x")
        #expect(system.diagnostics == [#"/etc/cron.d/x:1: user: no such user "nobody""#, "/etc/cron.d/x:2: expected a user name and a command after the schedule"])
        let (zone, _) = try convert("CRON_TZ=Mars/Olympus\n0 0 * * * /bin/x\n", user: "alice", path: "/tmp/z")
        #expect(zone.diagnostics.count == 1)
        #expect(zone.diagnostics.first?.hasPrefix("/tmp/z:2: ") == true)
    }

    @Test func aUserCrontabWithAndWithoutUser() throws {
        let text = "*/10 * * * * $HOME/bin/sync-mail\n"
        let (with, withConfig) = try convert(text, user: "www-data", path: "/var/spool/cron/crontabs/www-data")
        #expect(with.diagnostics == [])
        let sync = try job(withConfig, "sync-mail")
        #expect(sync.user == "www-data")
        #expect(sync.cwd == "/var/www")
        let (without, withoutConfig) = try convert(text, path: "<stdin>")
        #expect(without.config.hasPrefix("# timerd jobs imported from <stdin> by timerctl import crontab.\n# They run as timerd's own user"))
        #expect(try job(withoutConfig, "sync-mail").user == nil)
        #expect(try job(withoutConfig, "sync-mail").cwd == nil)
    }

    @Test func theCronDirectoriesAreOneRunPartsJobEach() throws {
        let expected = ["cron.hourly": "17 * * * *", "cron.daily": "25 6 * * *", "cron.weekly": "47 6 * * 7", "cron.monthly": "52 6 1 * *"]
        for (name, schedule) in expected {
            let result = try #require(Self.importer.convertDirectory("/etc/" + name))
            #expect(result.diagnostics == [])
            let config = try ConfigLoader.parse(result.config, path: "/etc/timerd/timerd.conf", fileSystem: Self.fileSystem)
            let spec = try job(config, name)
            #expect(spec.schedule == .cron(try CronExpression.parse(schedule)))
            #expect(spec.misfire == .once)
            #expect(spec.action == .shell("run-parts --report /etc/\(name)"))
            #expect(spec.cwd == "/")
        }
        #expect(Self.importer.convertDirectory("/etc/cron.d") == nil)
    }

    /// Each imported job's schedule gives the fire times croniter gives for the crontab's own fields
    /// (including the day-of-month/day-of-week OR rule), in the job's zone.
    @Test func theImportedSchedulesFireWhenCronWould() throws {
        let schedules = [
            "17 * * * *", "25 6 * * *", "47 6 * * 7", "52 6 1 * *", "30 3 * * 0", "09,39 * * * *", "0 0 1,15 * mon",
            "0 0 */2 * mon", "0 0 13 * fri", "*/7 */5 */3 */2 */4", "0 9 * * mon-fri", "5 4 * jan-mar sun", "@hourly", "@daily",
            "@midnight", "@weekly", "@monthly", "@yearly", "@annually",
        ]
        let text = "CRON_TZ=Europe/Berlin\n" + schedules.map { "\($0) /usr/bin/job" }.joined(separator: "\n") + "\n"
        let (result, config) = try convert(text, user: "alice")
        #expect(result.diagnostics == [])
        try #require(config.jobs.count == schedules.count)
        let bases: [Int64] = [1_767_225_600, 1_774_744_200, 1_798_675_199]  // 2026-01-01, 2026-03-29 00:30, 2026-12-31 23:59:59
        var cases: [(expression: String, base: Int64, count: Int)] = []
        for schedule in schedules { for base in bases { cases.append((schedule, base, 6)) } }
        let oracle: (version: String, lines: [String])
        do {
            oracle = try CronOracle.run(cases)
        } catch let error as CronOracle.Unavailable {
            Issue.record("\(error)")
            return
        }
        try #require(oracle.lines.count == cases.count)
        for (index, item) in cases.enumerated() {
            let spec = config.jobs[index / bases.count].spec
            #expect(spec.timezone == "Europe/Berlin")
            guard case .cron(let expression) = spec.schedule else { Issue.record("\(spec.name) is not cron"); continue }
            var times: [Int64] = []
            var current = item.base
            for _ in 0..<item.count {
                guard let next = expression.next(after: current) else { break }
                times.append(next)
                current = next
            }
            #expect(times.map(String.init).joined(separator: " ") == oracle.lines[index], "\(item.expression) after \(item.base) (\(oracle.version))")
        }
    }

    // MARK: The command

    @Test func theCommandLine() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let path = directory.path + "/crontab"
        try FileSystem.writeAtomically(path, "0 0 * * * /bin/ok\n61 0 * * * /bin/bad\n")
        let left = Transcript()
        left.status = Timerctl.run(arguments: ["import", "crontab", path], context: offlineContext(left, verb: "import"))
        #expect(left.status == 1)
        #expect(left.stdout.contains("[job \"ok\"]"))
        #expect(left.stderr.hasPrefix("\(path):2: invalid cron expression"))
        let forced = Transcript()
        forced.status = Timerctl.run(arguments: ["import", "crontab", "--force", path], context: offlineContext(forced, verb: "import"))
        #expect(forced.status == 0)
        #expect(forced.stdout == left.stdout)
        let missing = Transcript()
        missing.status = Timerctl.run(arguments: ["import", "crontab", path + ".none"], context: offlineContext(missing, verb: "import"))
        #expect(missing.status == 1)
        #expect(missing.stdout == "")
        #expect(missing.stderr.hasPrefix("\(path).none: cannot read: "))
        let both = Transcript()
        both.status = Timerctl.run(arguments: ["import", "crontab", "--system", "--user", "alice", path], context: offlineContext(both, verb: "import"))
        #expect(both.status == 2)
        #expect(throws: UsageError.self) { try CommandParser.parse(["import", "systemd"]) }
        #expect(throws: UsageError.self) { try CommandParser.parse(["import"]) }
        #expect(throws: UsageError.self) { try CommandParser.parse(["import", "crontab", "a", "b"]) }
        #expect(try CommandParser.parse(["import", "crontab"]).action == .importCrontab(path: "-", []))
        #expect(ImportCommand.isSystemCrontab("/etc/crontab") && ImportCommand.isSystemCrontab("/etc/cron.d/php"))
        #expect(!ImportCommand.isSystemCrontab("/etc/cron.d/") && !ImportCommand.isSystemCrontab("/var/spool/cron/crontabs/root"))
    }
}

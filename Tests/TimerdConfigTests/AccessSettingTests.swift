import Testing
import TimerdConfig
import TimerdCore

/// The `[daemon]` access keys and `user=`/`group=` in jobs (docs/security.md).
@Suite struct AccessSettingTests {
    /// Loads `text` on a system whose only accounts are `users` and `groups`.
    func loadWithAccounts(_ text: String, users: Set<String> = ["root", "alice", "bob"], groups: Set<String> = ["root", "ops"]) -> Result<Configuration, ConfigErrors> {
        var fileSystem = InMemoryConfigFileSystem([mainPath: text])
        fileSystem.users = users
        fileSystem.groups = groups
        return ConfigLoader.loadResult(path: mainPath, fileSystem: fileSystem)
    }

    func diagnostics(_ text: String) -> [String] {
        guard case .failure(let errors) = loadWithAccounts(text) else { return [] }
        return errors.diagnostics.map(\.description)
    }

    @Test func defaultsComeFromLimits() throws {
        let access = try #require(configuration("")).settings.access
        #expect(access == AccessSettings())
        #expect(access.socketGroup == nil && access.allowUsers == nil && access.allowGroups == nil)
        #expect(access.maxConnections == Limits.defaultMaxConnections)
        #expect(access.idleTimeout == Limits.defaultIdleTimeout)
        #expect(access.maxOutputMemory == Limits.defaultMaxOutputMemory)
    }

    @Test func everyKeyIsRead() throws {
        let loaded = try loadWithAccounts("""
            [daemon]
            socket_group = ops
            allow_users = alice, bob,alice
            allow_groups = ops
            max_connections = 100
            max_connections_per_user = 5
            max_request_rate = 50
            idle_timeout = 30s
            user_max_jobs = 0
            user_max_runs_per_minute = 60
            max_output_memory = 8M
            """).get()
        let access = loaded.settings.access
        #expect(access.socketGroup == "ops")
        #expect(access.allowUsers == ["alice", "bob"])
        #expect(access.allowGroups == ["ops"])
        #expect(access.maxConnections == 100 && access.maxConnectionsPerUser == 5 && access.maxRequestRate == 50)
        #expect(access.idleTimeout == .seconds(30))
        #expect(access.userMaxJobs == 0 && access.userMaxRunsPerMinute == 60)
        #expect(access.maxOutputMemory == 8 << 20)
        #expect(Set(AccessSettings.keys).isSubset(of: Set(ConfigLoader.daemonKeys)))
    }

    @Test func badValuesPointAtTheirLines() {
        #expect(diagnostics("""
            [daemon]
            socket_group = wheel
            allow_users = alice, alcie
            allow_groups = 0
            max_connections = 0
            max_request_rate = lots
            idle_timeout = 10ms
            max_output_memory = 1K
            socket_group = ops
            """) == [
                at(2, "socket_group: no such group \"wheel\""),
                at(3, "allow_users: no such user \"alcie\""),
                at(4, "allow_groups: give a name, not a number (\"0\")"),
                at(5, "max_connections: expected a whole number from 1 to 1000000, got \"0\""),
                at(6, "max_request_rate: expected a whole number from 1 to 1000000, got \"lots\""),
                at(7, "idle_timeout: must be at least 1s"),
                at(8, "max_output_memory: expected a size of at least 4K, like 65536, 512K, 64M or 1G, got \"1K\""),
                at(9, "socket_group is given more than once (first at line 2)"),
            ])
        #expect(diagnostics("[daemon]\nsocket_group = ops, root\n") == [at(2, "socket_group: give one group")])
    }

    @Test func jobUsersAndGroupsMustExist() {
        #expect(diagnostics("""
            [job "a"]
            every = 1h
            command = true
            user = alice
            group = ops

            [job "b"]
            every = 1h
            command = true
            user = mallory
            group = wheel
            """) == [at(10, "user: no such user \"mallory\""), at(11, "group: no such group \"wheel\"")])
    }

    @Test func byteCounts() {
        #expect(ByteCount.parse("65536") == 65_536)
        #expect(ByteCount.parse("512K") == 512 << 10 && ByteCount.parse("64m") == 64 << 20 && ByteCount.parse("1G") == 1 << 30)
        #expect(ByteCount.parse("64MB") == 64 << 20 && ByteCount.parse("64MiB") == 64 << 20 && ByteCount.parse("2kb") == 2 << 10)
        for bad in ["", "K", "1.5M", "-1", "1P", "1 M", "99999999999999999999G", "64B", "MB", "1MBB", "1iB"] {
            #expect(ByteCount.parse(bad) == nil, "\(bad)")
        }
    }
}

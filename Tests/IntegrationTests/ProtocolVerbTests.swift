import Foundation
import Testing

/// Each verb over the raw protocol, its success and each error, against the real daemon.
@Suite struct ProtocolVerbTests {
    @Test func pingVersionHelp() throws {
        let daemon = try Daemon()
        #expect(try daemon.request("PING") == "OK")
        #expect(try daemon.request("ping") == "OK", "verbs are case-insensitive")
        #expect(try daemon.request("PING extra").hasPrefix("ERR bad-argument "))
        #expect(try daemon.request("VERSION") == #"OK {"protocol":1,"version":"0.1.0"}"#)
        let help = try daemon.request("HELP")
        #expect(help.hasPrefix("OK ["))
        for verb in ["PING", "ADD NAME", "EXEC", "CANCEL", "PAUSE", "RESUME", "RUN", "LIST", "SHOW", "RELOAD"] {
            #expect(help.contains(verb), "HELP lists \(verb)")
        }
        #expect(try daemon.request("FROB x").hasPrefix("ERR unknown-verb "))
    }

    @Test func addShowListCancel() throws {
        let daemon = try Daemon()
        #expect(try daemon.request("ADD later every=1h command='echo hi'") == "OK")
        #expect(try daemon.request("ADD later every=1h command=true").hasPrefix("ERR exists "))
        let info = try daemon.show("later")
        #expect(info["state"] as? String == "scheduled")
        #expect(info["schedule"] as? String == "every 1h")
        #expect(info["source"] as? String == "runtime")
        #expect(info["runs"] as? Int == 0)
        #expect(info["next_fire"] is String)
        #expect(info["last_result"] is NSNull)
        let list = try daemon.request("LIST")
        #expect(list.hasPrefix("OK [{") && list.contains(#""name":"later""#))
        #expect(try daemon.request("CANCEL later") == "OK")
        #expect(try daemon.request("SHOW later").hasPrefix("ERR no-such-job "))
        #expect(try daemon.request("CANCEL later").hasPrefix("ERR no-such-job "))
        #expect(try daemon.request("LIST") == "OK []")
        // A cancelled name may be used again by hand.
        #expect(try daemon.request("ADD later in=1h command=true") == "OK")
    }

    @Test func addErrors() throws {
        let daemon = try Daemon()
        #expect(try daemon.request("ADD").hasPrefix("ERR missing-argument "))
        #expect(try daemon.request("ADD x command=true").hasPrefix("ERR missing-argument "))
        #expect(try daemon.request("ADD x every=5s").hasPrefix("ERR missing-argument "))
        #expect(try daemon.request("ADD x every=banana command=true").hasPrefix("ERR bad-argument "))
        #expect(try daemon.request("ADD x every=5s in=5s command=true").hasPrefix("ERR bad-argument "))
        #expect(try daemon.request("ADD 'bad name' every=5s command=true").hasPrefix("ERR bad-argument "))
        #expect(try daemon.request("ADD x every=5s command=true colour=red").hasPrefix("ERR bad-argument unknown key"))
        #expect(try daemon.request("ADD x every=5s command=true overlap=sometimes").hasPrefix("ERR bad-argument "))
        #expect(try daemon.request("ADD x at=2001-01-01T00:00:00Z command=true").hasPrefix("ERR bad-argument "))
        #expect(try daemon.request("ADD x every=5s command='unterminated").hasPrefix("ERR bad-quoting "))
        #expect(try daemon.request("ADD x every=5s --").hasPrefix("ERR bad-argument "))
        #expect(try daemon.request("ADD a b every=5s command=true").hasPrefix("ERR bad-argument "))
        #expect(try daemon.request("LIST") == "OK []", "no failed ADD left a job behind")
    }

    @Test func execGeneratesNamesThatAreNeverReused() throws {
        let daemon = try Daemon()
        var names: [String] = []
        for _ in 0..<3 {
            let reply = try daemon.request("EXEC start=1h command=true")
            let json = try JSONSerialization.jsonObject(with: Data(reply.dropFirst(3).utf8)) as! [String: String]
            names.append(json["name"]!)
        }
        #expect(names == ["exec-1", "exec-2", "exec-3"])
        #expect(try daemon.request("CANCEL exec-3") == "OK")
        // A name taken by hand is skipped by the generator, and a cancelled generated name is not handed out again.
        #expect(try daemon.request("ADD exec-4 in=1h command=true") == "OK")
        let next = try daemon.request("EXEC start=1h command=true")
        #expect(next == #"OK {"name":"exec-5"}"#)
        #expect(try daemon.request("EXEC start=1h").hasPrefix("ERR missing-argument "))
        #expect(try daemon.request("EXEC every=1s command=true").hasPrefix("ERR bad-argument "))
        #expect(try daemon.request("EXEC repeats=yes command=true").hasPrefix("ERR missing-argument "))
        #expect(try daemon.request("EXEC repeats=perhaps command=true").hasPrefix("ERR bad-argument "))
        let repeating = try daemon.request("EXEC start=1h interval=2h repeats=yes async=yes -- /bin/true")
        #expect(repeating == #"OK {"name":"exec-6"}"#)
        let info = try daemon.show("exec-6")
        #expect(info["schedule"] as? String == "every 2h (start 1h)")
        #expect((info["options"] as? [String])?.contains("overlap=allow") == true)
        #expect((try daemon.show("exec-5")["options"] as? [String])?.contains("overlap=queue") == true)
    }

    @Test func verbsCheckTheirArguments() throws {
        let daemon = try Daemon()
        #expect(try daemon.request("CANCEL").hasPrefix("ERR missing-argument "))
        #expect(try daemon.request("PAUSE").hasPrefix("ERR missing-argument "))
        #expect(try daemon.request("RESUME").hasPrefix("ERR missing-argument "))
        #expect(try daemon.request("RUN").hasPrefix("ERR missing-argument "))
        #expect(try daemon.request("SHOW").hasPrefix("ERR missing-argument "))
        #expect(try daemon.request("PAUSE nope").hasPrefix("ERR no-such-job "))
        #expect(try daemon.request("RESUME nope").hasPrefix("ERR no-such-job "))
        #expect(try daemon.request("RUN nope").hasPrefix("ERR no-such-job "))
        #expect(try daemon.request("LIST x").hasPrefix("ERR bad-argument "))
        #expect(try daemon.request("LIST x=1").hasPrefix("ERR bad-argument "))
        #expect(try daemon.request("RESUME a after=soon").hasPrefix("ERR bad-argument "))
        #expect(try daemon.request("RESUME a b now after=1s").hasPrefix("ERR bad-argument "))
        #expect(try daemon.request("RUN a b").hasPrefix("ERR bad-argument "))
        // All-or-nothing: one unknown name means nothing is cancelled.
        #expect(try daemon.request("ADD keep in=1h command=true") == "OK")
        #expect(try daemon.request("CANCEL keep nope").hasPrefix("ERR no-such-job "))
        #expect(try daemon.show("keep")["state"] as? String == "scheduled")
        #expect(try daemon.request("PAUSE keep nope").hasPrefix("ERR no-such-job "))
        #expect(try daemon.show("keep")["state"] as? String == "scheduled")
    }

    @Test func pauseAndResumeStates() throws {
        let daemon = try Daemon()
        #expect(try daemon.request("ADD p every=1h command=true") == "OK")
        #expect(try daemon.request("PAUSE p") == "OK")
        var info = try daemon.show("p")
        #expect(info["state"] as? String == "paused")
        #expect(info["next_fire"] is NSNull)
        #expect(try daemon.request("PAUSE p") == "OK", "pausing twice is harmless")
        #expect(try daemon.request("RESUME p") == "OK")
        info = try daemon.show("p")
        #expect(info["state"] as? String == "scheduled")
        #expect(info["next_fire"] is String)
        #expect(try daemon.request("RESUME p") == "OK", "resuming a scheduled job is harmless")
    }

    @Test func finishedJobsRefusePauseAndResumeButCanRun() throws {
        let daemon = try Daemon()
        let out = daemon.directory + "/out"
        #expect(try daemon.request("ADD once in=10ms command='echo $TIMERD_RUN >> \(out)'") == "OK")
        // Finished and done running: RUN while the fire's run still goes would be `busy` (overlap=skip).
        try eventually("one-shot finished") {
            let info = try daemon.show("once")
            return info["state"] as? String == "finished" && info["runs"] as? Int == 1 && info["running"] as? Int == 0
        }
        #expect(try daemon.request("PAUSE once").hasPrefix("ERR finished "))
        #expect(try daemon.request("RESUME once").hasPrefix("ERR finished "))
        #expect(try daemon.request("RUN once") == #"OK {"status":"started"}"#)
        eventually("manual run") { daemon.lines("out") == ["1", "2"] }
    }
}

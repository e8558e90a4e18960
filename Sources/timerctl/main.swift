print("timerctl: not yet")

def describe(prefix, queue, message):
    return f"{prefix} {queue} {message.id} attempt={message.attempts} body={message.body}"

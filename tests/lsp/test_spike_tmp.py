import json
from support.scripted_engine import call
async def test_spike(launch):
    editor = await launch("neovim")
    buf = editor.open("src/app.py")
    editor.type(buf, "nme", "name")
    editor.script_replies({"calls": [call("read_file", path="src/app.py"), call("edit_file", path="src/util.py", old_string="x * 2", new_string="x + x")]}, {"text": "done"})
    thread = await editor.start_thread()
    turn = await editor.start_turn(thread, "read it")
    print(await editor.turn_completed(turn))
    [print(json.dumps(e, indent=1)) for e in editor.events if e["type"]=="item.completed" and e["item"].get("tool")]
    print(editor.client.messages)

"""Writes this directory's sample files (written for this project, in the real formats):

* naturalconv/dialog_release.json: NaturalConv's layout, a JSON list of {dialog_id, document_id,
  content}; one record is malformed, as real corpora have some;
* dulemon/self/train.json: DuLeMon's JSON Lines (`p1_persona`, `p2_persona`, `conversation` of
  "Usr: ..." / "Bot: ...\\tpersona ids"), word-segmented as released; one conversation has one speaker;
* conceptnet-assertions-zh-sample.csv: ConceptNet 5.7 assertions (tab-separated assertion URI,
  relation, start, end, JSON info) between the dialogues' concepts, plus edges of other languages;
* annotations.jsonl: knowledge annotations (one item per line; see readers/corecode.py), most valid,
  some breaking one ontology or dialogue rule each, one malformed line.

Run `python data/sample/corecode/make_sample.py` after editing the lists below.
"""

import json
from pathlib import Path

HERE = Path(__file__).resolve().parent

# (dialog_id, document_id, utterances) written for this project's sample
NATURALCONV = [
 ("1_1", 1, ["你好，今天天气怎么样？", "外面一直在下雨，出门记得带伞。", "我的雨伞昨天落在公司了。", "那你穿雨衣吧，或者在楼下超市买一把。",
             "超市的雨伞太贵了，我还是等雨停再走。", "雨停了路上还是很湿，小心别滑倒。", "谢谢提醒，我换一双防滑的鞋子。", "好的，路上注意安全。"]),
 ("2_1", 2, ["你晚上吃饭了吗？", "还没有，我正在厨房做饭。", "你做的什么菜？闻起来好香。", "红烧肉，要先把肉切成小块。",
             "切肉的时候小心别切到手，刀很锋利。", "放心吧，我用刀很熟练，肉已经下锅了。", "锅里的油热了吗？别被油溅到。", "热了，我放了糖和酱油，颜色很好看。",
             "闻到香味我都饿了，可以给我留一碗吗？", "当然可以，米饭也快煮好了。"]),
 ("3_1", 3, ["你最近在准备考试吗？", "是啊，下周就要期末考试了，每天都在图书馆复习。", "图书馆安静吗？我在家学习总是分心。", "很安静，书也多，学习效率很高。",
             "那我明天也去图书馆看书，你几点出发？", "早上八点，去晚了没有座位。", "八点我可能起不来，我定个闹钟吧。", "闹钟多定几个，考试前要早睡早起。"]),
 ("4_1", 4, ["昨天的篮球比赛你看了吗？", "看了，湖人最后一分钟投进三分球赢了。", "那个球员投篮真准，他训练很刻苦。", "训练的时候他每天要投一千个球，所以比赛很稳定。",
             "怪不得，球迷都在现场欢呼。", "现场的观众特别多，门票一早就卖完了。", "下次有比赛我们一起去球馆看吧。", "好啊，我提前在网上买票。"]),
 ("5_1", 5, ["你周末打算去哪里旅行？", "我想去海边，看看大海，吃点海鲜。", "海边的沙滩很漂亮，可以游泳晒太阳。", "游泳之前要做好热身，不然容易抽筋。",
             "晒太阳也要涂防晒霜，我上次皮肤都晒伤了。", "对，晒伤很疼，我带了帽子和墨镜。", "你订好酒店了吗？", "订了，酒店离海边很近，走路五分钟。"]),
 ("6_1", 6, ["你怎么一直咳嗽？", "我感冒了，昨天还发烧了。", "发烧要多喝水，最好去医院看看医生。", "医生给我开了药，让我在家休息。",
             "吃药以后好点了吗？", "好多了，就是喉咙还疼。", "喉咙疼可以喝点蜂蜜水。", "谢谢，我这就去烧水。"]),
 ("7_1", 7, ["你养的猫最近怎么样？", "它很调皮，每天晚上在客厅跑来跑去。", "猫喜欢抓老鼠吗？", "它只会抓玩具老鼠，真的老鼠它会害怕。",
             "哈哈，那你给它买猫粮了吗？", "买了，它吃完猫粮就在沙发上睡觉。", "沙发上一定都是猫毛吧。", "是啊，每天都要用吸尘器打扫。"]),
 ("8_1", 8, ["你好！", "你好呀。", "最近在忙什么？", "没忙什么，在家待着。", "那挺好的。", "是啊，挺好的。"]),
 ("9_1", 9, ["你的手机怎么没电了？", "我忘记充电了，电池用得很快。", "我的充电器借给你，插座在桌子下面。", "谢谢，充一会儿电就能开机了。",
             "开机以后给你妈妈打个电话，她刚才在找你。", "好的，我马上给她打电话。"]),
 ("10_1", 10, ["明天是你的生日吧？", "对，我打算请朋友来家里吃蛋糕。", "蛋糕要买多大的？人多的话买大一点。", "买个大的，上面放很多水果和蜡烛。",
               "点蜡烛的时候记得许愿。", "我的愿望就是明年能去旅行。", "那我送你一个旅行箱当礼物吧。", "太好了，谢谢你的礼物！"]),
]
NATURALCONV_BAD = {"dialog_id": "11_1", "document_id": 11, "content": "这一条的内容不是列表"}
DULEMON = [  # word-segmented as the release is
 ["Usr: 我 最近 开始 学 游泳 了 。", "Bot: 游泳 是 很 好 的 运动 ， 可以 锻炼 身体 。\tB1", "Usr: 但是 我 在 水 里 总是 害怕 。",
  "Bot: 害怕 的话 可以 先 在 浅水区 练习 呼吸 。", "Usr: 教练 也 让 我 先 练 憋气 。", "Bot: 憋气 练好 了 ， 游泳 就 不 会 呛水 了 。\tU1",
  "Usr: 我 想 下个月 参加 比赛 。", "Bot: 比赛 之前 要 多 训练 ， 加油 ！"],
 ["Usr: 我 家 附近 新 开 了 一 家 咖啡店 。", "Bot: 咖啡 好喝 吗 ？ 我 每天 早上 都 要 喝 一杯 。", "Usr: 咖啡 很 香 ， 就是 有点 苦 。",
  "Bot: 苦 的话 可以 加 牛奶 和 糖 。", "Usr: 加 了 牛奶 以后 味道 好 多 了 。", "Bot: 不过 晚上 别 喝 咖啡 ， 会 睡不着 。"],
 ["Usr: 我 今天 读 了 一 本 书 。", "Usr: 书 里 讲 了 很多 历史 故事 。", "Usr: 我 觉得 很 有意思 。"],
]

# one-hop ConceptNet edges (relation, e1, e2): e1 said in one utterance, e2 in the next
EDGES = [
    ("RelatedTo", "下雨", "雨伞"), ("Synonym", "伞", "雨伞"), ("RelatedTo", "雨伞", "雨衣"), ("AtLocation", "雨伞", "超市"),
    ("RelatedTo", "雨衣", "雨伞"), ("Causes", "雨", "滑倒"), ("RelatedTo", "滑倒", "防滑"),
    ("RelatedTo", "吃饭", "做饭"), ("RelatedTo", "做饭", "菜"), ("RelatedTo", "菜", "肉"), ("RelatedTo", "肉", "刀"),
    ("HasPrerequisite", "切肉", "刀"), ("RelatedTo", "下锅", "锅"), ("RelatedTo", "锅", "热"), ("CausesDesire", "饿", "米饭"),
    ("RelatedTo", "考试", "期末考试"), ("HasPrerequisite", "考试", "复习"), ("HasProperty", "图书馆", "安静"),
    ("RelatedTo", "复习", "学习"), ("RelatedTo", "图书馆", "书"), ("RelatedTo", "书", "看书"),
    ("RelatedTo", "篮球比赛", "三分球"), ("RelatedTo", "三分球", "投篮"), ("RelatedTo", "投篮", "球"),
    ("RelatedTo", "球员", "比赛"), ("RelatedTo", "比赛", "球迷"), ("RelatedTo", "欢呼", "观众"), ("RelatedTo", "门票", "球馆"),
    ("RelatedTo", "旅行", "大海"), ("RelatedTo", "大海", "沙滩"), ("RelatedTo", "大海", "游泳"),
    ("HasPrerequisite", "游泳", "热身"), ("Causes", "晒太阳", "晒"), ("RelatedTo", "防晒霜", "帽子"),
    ("RelatedTo", "咳嗽", "感冒"), ("RelatedTo", "感冒", "医生"), ("RelatedTo", "发烧", "医院"), ("RelatedTo", "医生", "药"),
    ("RelatedTo", "药", "吃药"), ("HasPrerequisite", "蜂蜜水", "烧水"),
    ("RelatedTo", "猫", "调皮"), ("CapableOf", "猫", "抓"), ("CapableOf", "猫", "睡觉"), ("RelatedTo", "沙发", "猫"),
    ("HasA", "猫", "毛"), ("RelatedTo", "毛", "吸尘器"),
    ("RelatedTo", "手机", "电池"), ("RelatedTo", "电", "充电"), ("RelatedTo", "充电", "充电器"),
    ("HasPrerequisite", "充电", "插座"), ("UsedFor", "充电器", "充"),
    ("HasA", "蛋糕", "蜡烛"), ("HasA", "蛋糕", "水果"), ("RelatedTo", "许愿", "愿望"), ("RelatedTo", "旅行", "旅行箱"),
    ("IsA", "游泳", "运动"), ("RelatedTo", "游泳", "水"), ("RelatedTo", "水", "浅水区"), ("RelatedTo", "练习", "练"),
    ("RelatedTo", "游泳", "比赛"), ("HasPrerequisite", "比赛", "训练"),
    ("RelatedTo", "咖啡店", "咖啡"), ("HasProperty", "咖啡", "苦"),
    ("RelatedTo", "雨伞", "下雨"), ("IsA", "红烧肉", "肉"),  # reversed / same-utterance: no match
]
OTHER_EDGES = [("/r/RelatedTo", "/c/en/umbrella", "/c/en/rain"), ("/r/Synonym", "/c/zh/雨伞", "/c/en/umbrella"),
               ("/r/RelatedTo", "/c/ja/傘", "/c/ja/雨")]

# (dialogue, set, dimension, instance, domain, slot, value, [(role, utterance, phrase)], conflict_of, c1, c2)
NC, DL = "naturalconv-", "dulemon-self-train-"
ANNOTATIONS = [
    (NC + "1_1", "EASY", "event", "外面下雨", "subsequent", "subsequent event", "B提醒A出门带伞",
     [("instance", 1, "一直在下雨"), ("value", 1, "出门记得带伞")], 1, "出门记得带墨镜", "可以放心地去晒太阳"),
    (NC + "1_1", "EASY", "entity", "雨伞", "space", "at-location", "超市",
     [("instance", 3, "在楼下超市买一把")], 0, "在楼下鱼塘买一把", "从天上摘一把"),
    (NC + "1_1", "EASY", "event", "A换防滑的鞋子", "cause", "event cause", "雨后路上很湿，容易滑倒",
     [("instance", 6, "换一双防滑的鞋子"), ("value", 5, "小心别滑倒")], 0, "换一双光滑的鞋子", "光着脚出门"),
    (NC + "2_1", "EASY", "social interaction", "A闻到香味饿了", "social norms", "x's reaction", "A想吃B做的菜",
     [("instance", 8, "闻到香味我都饿了")], 0, "闻到臭味我都饿了", "看到垃圾我就想吃"),
    (NC + "2_1", "EASY", "entity", "刀", "attribute", "is", "锋利",
     [("instance", 4, "刀很锋利")], 0, "刀很柔软", "棉花做的刀切肉最快"),
    (NC + "2_1", "EASY", "event", "油溅到人", "precondition", "precondition", "锅里的油热了",
     [("instance", 6, "别被油溅到"), ("value", 6, "锅里的油热了吗")], 1, "锅里的水凉了吗", "锅已经放进冰箱了吗"),
    (NC + "3_1", "HARD", "event", "x去图书馆复习", "time", "time of occurrence", "期末考试前",
     [("instance", 1, "每天都在图书馆复习"), ("value", 1, "下周就要期末考试了")], 0, "每天都在游泳池复习", "整天在酒吧喝酒"),
    (NC + "3_1", "HARD", "entity", "图书馆", "attribute", "has", "很多书",
     [("instance", 3, "书也多")], 0, "书也少", "只卖新鲜蔬菜"),
    (NC + "3_1", "HARD", "event", "x起不来", "consequence", "subsequent event", "x定闹钟",
     [("instance", 6, "我可能起不来"), ("value", 6, "我定个闹钟吧")], 1, "我扔个闹钟吧", "我整夜都不睡觉吧"),
    (NC + "4_1", "HARD", "event", "x投进三分球赢了比赛", "cause", "event cause", "x训练很刻苦",
     [("instance", 1, "最后一分钟投进三分球赢了"), ("value", 2, "他训练很刻苦")], 1, "他训练很偷懒", "他从来不碰篮球"),
    (NC + "4_1", "HARD", "entity", "球迷", "space", "at-location", "比赛现场",
     [("instance", 4, "球迷都在现场欢呼")], 0, "球迷都在现场睡觉", "球迷都在家里写作业"),
    (NC + "5_1", "EASY", "event", "A晒太阳没涂防晒霜", "consequence", "subsequent event", "A的皮肤晒伤了",
     [("instance", 4, "晒太阳也要涂防晒霜"), ("value", 4, "皮肤都晒伤了")], 1, "皮肤都冻伤了", "皮肤变得又白又嫩"),
    (NC + "5_1", "EASY", "social interaction", "B去游泳", "social norms", "x should", "B应该先热身",
     [("instance", 3, "游泳之前要做好热身")], 0, "游泳之前要吃饱喝足", "游泳之前要喝一瓶酒"),
    (NC + "6_1", "EASY", "event", "A咳嗽", "cause", "event cause", "A感冒了",
     [("instance", 0, "一直咳嗽"), ("value", 1, "我感冒了")], 1, "我中奖了", "我刚跑完马拉松领了奖牌"),
    (NC + "6_1", "EASY", "entity", "蜂蜜水", "attribute", "used-for", "缓解喉咙疼",
     [("instance", 6, "喉咙疼可以喝点蜂蜜水")], 0, "喉咙疼可以喝点辣椒水", "喉咙疼可以大声唱一整天歌"),
    (NC + "9_1", "HARD", "event", "x忘记充电", "consequence", "subsequent event", "x的手机没电了",
     [("instance", 1, "忘记充电了"), ("value", 0, "手机怎么没电了")], 0, "记得充电了", "把手机扔进了水里"),
    (NC + "10_1", "EASY", "entity", "旅行箱", "attribute", "used-for", "装旅行的行李",
     [("instance", 6, "我送你一个旅行箱当礼物吧")], 0, "我送你一个旅行箱当早餐吧", "我送你一只会飞的大象吧"),
    (DL + "1", "EASY", "entity", "游泳", "attribute", "is-a", "运动",
     [("instance", 1, "游泳是很好的运动")], 0, "游泳是很好的食物", "游泳会让人越来越胖"),
    # each breaks one rule
    (NC + "1_1", "EASY", "event", "外面下雨", "emotion", "subsequent event", "A很难过",
     [("instance", 1, "一直在下雨")], 0, "一直在下雪", "阳光明媚"),
    (NC + "2_1", "EASY", "entity", "红烧肉", "cause", "event cause", "肉",
     [("instance", 3, "红烧肉")], 0, "红烧鱼", "一碗冰淇淋"),
    (NC + "3_1", "HARD", "event", "x复习", "time", "at-location", "图书馆",
     [("instance", 1, "在图书馆复习")], 0, "在游泳池复习", "在酒吧喝酒"),
    (NC + "4_1", "HARD", "entity", "门票", "attribute", "color-of", "红色",
     [("instance", 5, "门票一早就卖完了")], 0, "门票一早就烧完了", "门票是免费送的"),
    (NC + "5_1", "EASY", "entity", "酒店", "space", "spatially-adjacent", "海边",
     [("instance", 7, "酒店离海边很近")], 0, "酒店离海边很远", "酒店在月球上"),
    (NC + "6_1", "EASY", "entity", "医生", "attribute", "capable-of", "开药",
     [("instance", 3, "医生给我开了药")], 0, "医生给我开了药", "医生给我做了一碗面"),
    (NC + "7_1", "EASY", "entity", "猫", "attribute", "capable-of", "抓老鼠",
     [("instance", 2, "猫喜欢抓老鼠")], 0, "狗讨厌吃骨头和鸡蛋", "老鼠抓猫"),
    (NC + "7_1", "HARD", "social interaction", "A买猫粮", "social norms", "x's intent", "A想喂猫",
     [("instance", 4, "给它买猫粮了吗")], 0, "给它买狗粮了吗", "给它买了一台电脑吗"),
    (NC + "8_1", "EASY", "social interaction", "A问好", "social norms", "x's reaction", "B也问好",
     [("instance", 1, "你好呀")], 0, "你坏呀", "滚开"),
]
OFFSET_OFF = {22}  # the phrase's offset is written wrong (3 characters late)
MALFORMED = ['{"dialogue_id": "naturalconv-1_1", "set": "EASY"', '{"dialogue_id": "naturalconv-2_1", "set": "EASY"}']


def edge_line(rel: str, start: str, end: str, surface: str | None = None) -> str:
    info = {"dataset": "/d/conceptnet/4/zh", "license": "cc:by/4.0",
            "sources": [{"activity": "/s/activity/sample", "contributor": "/s/contributor/sample"}], "weight": 1.0}
    if surface:
        info["surfaceText"] = surface
    return "\t".join([f"/a/[{rel}/,{start}/,{end}/]", rel, start, end, json.dumps(info, ensure_ascii=False)])


def utterances(dialogue_id: str) -> list[str]:
    if dialogue_id.startswith(NC):
        return next(u for d, _, u in NATURALCONV if NC + d == dialogue_id)
    conv = DULEMON[int(dialogue_id[len(DL):]) - 1]
    from readers.dulemon import despace  # the reader's own normalisation: offsets are into what it reads

    return [despace(t.split(":", 1)[1].split("\t")[0]) for t in conv]


def main() -> None:
    nc = [{"dialog_id": d, "document_id": doc, "content": u} for d, doc, u in NATURALCONV]
    nc.insert(8, NATURALCONV_BAD)
    (HERE / "naturalconv").mkdir(exist_ok=True)
    (HERE / "naturalconv" / "dialog_release.json").write_text(json.dumps(nc, ensure_ascii=False, indent=1) + "\n")
    (HERE / "dulemon" / "self").mkdir(parents=True, exist_ok=True)
    personas = {"p1_persona": ["U1: 我 在 学 游泳"], "p2_persona": ["B1: 我 喜欢 运动"]}
    (HERE / "dulemon" / "self" / "train.json").write_text(
        "".join(json.dumps({**personas, "conversation": c}, ensure_ascii=False) + "\n" for c in DULEMON))
    lines = [edge_line(f"/r/{r}", f"/c/zh/{a}", f"/c/zh/{b}", f"[[{a}]]和[[{b}]]有关") for r, a, b in EDGES]
    for k, (r, a, b) in enumerate(OTHER_EDGES):
        lines.insert(5 + 7 * k, edge_line(r, a, b))
    (HERE / "conceptnet-assertions-zh-sample.csv").write_text("\n".join(lines) + "\n")
    out = []
    for k, (d, s, dim, inst, dom, slot, val, phrases, conflict_of, c1, c2) in enumerate(ANNOTATIONS):
        utts = utterances(d)
        ps = []
        for role, u, text in phrases:
            start = utts[u].find(text)
            assert start >= 0, (d, u, text)
            ps.append({"role": role, "utterance": u, "start": start + (3 if k in OFFSET_OFF else 0), "text": text})
        out.append(json.dumps({"id": f"cc-{k:03d}", "dialogue_id": d, "set": s, "dimension": dim, "instance": inst,
                               "domain": dom, "slot": slot, "value": val, "phrases": ps, "conflict_of": conflict_of,
                               "conflict_phrase_1": c1, "conflict_phrase_2": c2}, ensure_ascii=False))
    out[5:5] = MALFORMED[:1]
    out.append(MALFORMED[1])
    (HERE / "annotations.jsonl").write_text("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
